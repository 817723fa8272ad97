/* SPDX-License-Identifier: MIT */
/*
 * dioloop-fsx, shared by its parts: fsx.c (arguments, setup, the run),
 * ops.c (the PRNG, the model and the operations), report.c (the op log
 * and failure reports).  Single-threaded.
 *
 * Invariants: files[i].model holds files[i].size bytes, what the file
 * must read as; every op updates it only after the file said the op
 * succeeded.  A failed check never returns: it prints the report and
 * exits 1.
 */
#ifndef DIOLOOP_FSX_H
#define DIOLOOP_FSX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FSX_LOG_SIZE 100		/* ops kept for the failure report */
#define FSX_DIO_ALIGN 4096		/* -a: offset, length and buffer */
#define FSX_CHUNK (1u << 20)		/* whole-file reads, piece by piece */
#define FSX_BLOCK 4096			/* a node's size is rounded to this */
#define FSX_PROGRESS 1000		/* -p: a line every this many ops */
#define FSX_MAX_OP (1ull << 30)

enum fsx_op {
	OP_READ,	/* pread, unaligned, may cross EOF */
	OP_READ_EOF,	/* pread at, across or past EOF */
	OP_WRITE,	/* pwrite of random (or zero) bytes */
	OP_WRITE_EOF,	/* -B: pwrite past EOF must fail with ENOSPC */
	OP_PUNCH,	/* fallocate PUNCH_HOLE | KEEP_SIZE */
	OP_ZERO,	/* fallocate ZERO_RANGE | KEEP_SIZE */
	OP_ALLOC,	/* fallocate mode 0 inside the file: data stays */
	OP_FSYNC,
	OP_FDATASYNC,
	OP_COPY,	/* copy_file_range, non-overlapping */
	OP_COPY_EOF,	/* -B: copy_file_range past the end of FILE */
	OP_SEEK,	/* SEEK_DATA and SEEK_HOLE at one offset */
	OP_DIO_READ,	/* -a: aligned pread through the O_DIRECT fd */
	OP_DIO_WRITE,	/* -a: aligned pwrite through the O_DIRECT fd */
	OP_TRUNCATE,	/* -g: ftruncate to a block multiple */
	OP_MAP_READ,	/* -m: read through a MAP_SHARED mapping */
	OP_MAP_WRITE,	/* -m: store into a MAP_SHARED mapping, msync */
	OP_INJECT,	/* -X: a model byte flipped on purpose */
	OP_VERIFY,	/* the whole-file check at the end */
	NR_OPS
};

struct fsx_file {
	const char *path;
	const char *name;	/* "FILE" or "FILE2" in the log */
	int fd;
	int dio_fd;		/* O_DIRECT with -a, else -1 */
	uint8_t *model;		/* what each byte must read as */
	uint64_t size;		/* the size the file must have */
	uint64_t alloc;		/* bytes allocated at model */
};

/* One logged op; res/res2 are byte counts, offsets or -errno. */
struct fsx_log {
	uint64_t nr;
	enum fsx_op op;
	unsigned int file, file2;	/* index in fsx.files */
	uint64_t off, len, off2;
	int64_t res, res2;
	bool done;			/* res is set */
	bool zeros;			/* a write of zero bytes */
};

struct fsx_opts {
	uint64_t nr_ops;	/* -N */
	uint64_t seed;		/* -S, or from the clock */
	uint64_t maxlen;	/* -l: ops stay below; 0 = the file's size */
	uint64_t maxop;		/* -o: longest op */
	uint64_t inject_at;	/* -X: flip a model byte after this op */
	bool progress;		/* -p */
	bool quiet;		/* -q */
	bool dio;		/* -a */
	bool growable;		/* -g */
	bool block_eof;		/* -B */
	bool no_punch, no_zero, no_copy, no_seek;	/* -H -Z -C -D */
	bool mmap;		/* -m: mapped reads and writes */
	bool no_map_read, no_map_write;			/* -R -W */
};

struct fsx {
	struct fsx_opts o;
	struct fsx_file files[2];
	unsigned int nr_files;
	uint64_t rng[4];		/* xoshiro256** state */
	uint64_t nr;			/* the op running, from 1 */
	struct fsx_log log[FSX_LOG_SIZE];
	uint64_t nr_logged;
	uint64_t counts[NR_OPS];
	unsigned int weights[NR_OPS];
	uint8_t *buf;			/* 2 * MAX(maxop, FSX_CHUNK) bytes */
	uint8_t *dio_buf;		/* aligned, with -a */
	bool inject_next;		/* -X: the next op reads inject_pos */
	uint64_t inject_pos;
	int argc;
	char **argv;
};

extern const char *const fsx_op_names[NR_OPS];

static inline unsigned int fsx_file_index(const struct fsx *x,
					  const struct fsx_file *f)
{
	return (unsigned int)(f - x->files);
}

/* The bytes ops may touch: below -l, and below the size unless -g. */
static inline uint64_t fsx_region(const struct fsx *x,
				  const struct fsx_file *f)
{
	if (x->o.growable)
		return x->o.maxlen;
	return x->o.maxlen < f->size ? x->o.maxlen : f->size;
}

/* report.c */
/* Start a log entry for the op about to run; fsx_log_done sets its result. */
struct fsx_log *fsx_log_op(struct fsx *x, enum fsx_op op,
			   const struct fsx_file *f, uint64_t off, uint64_t len);
void fsx_log_done(struct fsx_log *l, int64_t res);
/* Print the seed, how to repeat the run and the op log; exit 1. */
_Noreturn void fsx_report_exit(struct fsx *x);
/* A one-line reason, then the report; exit 1. */
__attribute__((format(printf, 2, 3)))
_Noreturn void fsx_fail(struct fsx *x, const char *fmt, ...);
/* Compare got with the model of f at off; report and exit on a difference. */
void fsx_check_data(struct fsx *x, struct fsx_file *f, uint64_t off,
		    const uint8_t *got, size_t len, const char *how);

/* ops.c */
/* Seed the PRNG: the same seed gives the same ops on every host. */
void fsx_seed(struct fsx *x, uint64_t seed);
/* Run op x->nr: a random one, or the read-back after an -X injection. */
void fsx_run_op(struct fsx *x);
/* -X: flip one model byte of FILE; the next op reads it back. */
void fsx_inject(struct fsx *x);
/* Read the whole file and compare it with the model. */
void fsx_verify_file(struct fsx *x, struct fsx_file *f);

#endif
