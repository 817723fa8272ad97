/* SPDX-License-Identifier: MIT */
/*
 * dioloop-fsx: a random-operation checker for block nodes, after the fsx
 * of xfstests and LTP.  An in-memory model holds what every byte of FILE
 * (and FILE2) must read as; a seeded PRNG picks the operations, and each
 * result is checked against the model.  FILE keeps its size, as a node
 * does, unless -g.  The seed is printed, so a failure repeats with -S.
 * This file: arguments, setup and the run.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/fsx/fsx.h"

/* Relative frequency of each random op, before options disable some. */
static const unsigned int op_weights[NR_OPS] = {
	[OP_READ] = 20,		[OP_READ_EOF] = 4,
	[OP_WRITE] = 20,	[OP_WRITE_EOF] = 2,
	[OP_PUNCH] = 6,		[OP_ZERO] = 6,
	[OP_ALLOC] = 2,		[OP_COPY_EOF] = 2,
	[OP_FSYNC] = 2,		[OP_FDATASYNC] = 2,
	[OP_COPY] = 8,		[OP_SEEK] = 8,
	[OP_DIO_READ] = 5,	[OP_DIO_WRITE] = 5,
	[OP_TRUNCATE] = 2,
	[OP_MAP_READ] = 8,	[OP_MAP_WRITE] = 8,
};

/* Open path and load the model from it: 0 or -errno (message printed). */
static int file_open(struct fsx *x, struct fsx_file *f, const char *path,
		     const char *name)
{
	struct stat st;
	uint64_t pos;

	f->path = path;
	f->name = name;
	f->dio_fd = -1;
	f->fd = open(path, O_RDWR | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st) < 0) {
		fprintf(stderr, "dioloop-fsx: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (x->o.dio) {
		f->dio_fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (f->dio_fd < 0) {
			fprintf(stderr, "dioloop-fsx: %s: O_DIRECT: %s\n", path,
				strerror(errno));
			return -errno;
		}
	}
	f->size = (uint64_t)st.st_size;
	f->alloc = MAX(f->size, x->o.growable ? x->o.maxlen : 0);
	f->model = g_malloc0(MAX(f->alloc, 1));
	for (pos = 0; pos < f->size;) {
		ssize_t r = pread(f->fd, f->model + pos,
				  MIN(f->size - pos, (uint64_t)FSX_CHUNK),
				  (off_t)pos);

		if (r <= 0) {
			fprintf(stderr, "dioloop-fsx: %s: reading at 0x%" PRIx64
				": %s\n", path, pos,
				r < 0 ? strerror(errno) : "unexpected EOF");
			return r < 0 ? -errno : -EIO;
		}
		pos += (uint64_t)r;
	}
	return 0;
}

/* A size with an optional k/m/g suffix: 0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* The options, for -h (stdout). */
static void usage(FILE *out)
{
	fprintf(out,
"Usage: dioloop-fsx [options] FILE [FILE2]\n"
"Random reads, writes, discards, copies and seeks on FILE, checked against\n"
"an in-memory model.  FILE2, if given, is the other end of copies.\n"
"  -N ops     number of operations (default 10000)\n"
"  -S seed    PRNG seed (default: from the clock; always printed)\n"
"  -l maxlen  ops stay below this offset (default: the file's size;\n"
"             with -g, the largest size, default size + 1M)\n"
"  -o maxop   longest read, write or copy (default 256K)\n"
"  -a         also O_DIRECT reads and writes, 4096-aligned\n"
"  -g         growable: writes may extend the file, truncate is used\n"
"  -m         also mapped reads and writes (MAP_SHARED, msync MS_SYNC)\n"
"  -R / -W    with -m: no mapped reads / no mapped writes\n"
"  -B         block semantics: writes and copies past EOF must fail with\n"
"             ENOSPC (or stop short of EOF)\n"
"  -H / -Z / -C / -D   no punch hole / zero range / copy_file_range /\n"
"             SEEK_DATA and SEEK_HOLE\n"
"  -X n       self-test: flip a model byte after op n (must then fail)\n"
"  -p         progress every %u ops\n"
"  -q         quiet: only the result line and failures\n"
"Exit status: 0 OK, 1 a check failed, 2 bad arguments (or a FILE that\n"
"cannot be opened or read).\n", FSX_PROGRESS);
}

__attribute__((format(printf, 1, 2)))
/* A one-line message about the arguments; exit 2. */
static _Noreturn void bad_args(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dioloop-fsx: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try -h)\n");
	exit(2);
}

/* The ops this run picks from, by the options. */
static void set_weights(struct fsx *x)
{
	memcpy(x->weights, op_weights, sizeof(x->weights));
	if (!x->o.block_eof)
		x->weights[OP_WRITE_EOF] = x->weights[OP_COPY_EOF] = 0;
	if (!x->o.dio)
		x->weights[OP_DIO_READ] = x->weights[OP_DIO_WRITE] = 0;
	if (!x->o.growable)
		x->weights[OP_TRUNCATE] = 0;
	if (!x->o.mmap || x->o.no_map_read)
		x->weights[OP_MAP_READ] = 0;
	if (!x->o.mmap || x->o.no_map_write)
		x->weights[OP_MAP_WRITE] = 0;
	if (x->o.no_punch)
		x->weights[OP_PUNCH] = 0;
	if (x->o.no_zero)
		x->weights[OP_ZERO] = 0;
	if (x->o.no_copy)
		x->weights[OP_COPY] = x->weights[OP_COPY_EOF] = 0;
	if (x->o.no_seek)
		x->weights[OP_SEEK] = 0;
}

/* Options into x->o, FILE [FILE2] left at argv[optind]; exit 2 if bad. */
static void parse_args(struct fsx *x, int argc, char **argv)
{
	struct fsx_opts *o = &x->o;
	bool have_seed = false;
	uint64_t *val;
	int c;

	o->nr_ops = 10000;
	o->maxop = 256 << 10;
	while ((c = getopt(argc, argv, ":N:S:l:o:X:agmBHZCDRWpqh")) != -1) {
		bool *flag = NULL;

		val = NULL;
		switch (c) {
		case 'N':
			val = &o->nr_ops;
			break;
		case 'S':
			val = &o->seed;
			have_seed = true;
			break;
		case 'l':
			val = &o->maxlen;
			break;
		case 'o':
			val = &o->maxop;
			break;
		case 'X':
			val = &o->inject_at;
			break;
		case 'a':
			flag = &o->dio;
			break;
		case 'g':
			flag = &o->growable;
			break;
		case 'm':
			flag = &o->mmap;
			break;
		case 'R':
			flag = &o->no_map_read;
			break;
		case 'W':
			flag = &o->no_map_write;
			break;
		case 'B':
			flag = &o->block_eof;
			break;
		case 'H':
			flag = &o->no_punch;
			break;
		case 'Z':
			flag = &o->no_zero;
			break;
		case 'C':
			flag = &o->no_copy;
			break;
		case 'D':
			flag = &o->no_seek;
			break;
		case 'p':
			flag = &o->progress;
			break;
		case 'q':
			flag = &o->quiet;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			bad_args("option -%c needs a value", optopt);
		default:
			bad_args("unknown option -%c", optopt);
		}
		if (flag)
			*flag = true;
		else if (parse_size(optarg, val) < 0)
			bad_args("bad value '%s' for -%c", optarg, c);
	}
	if (argc - optind < 1 || argc - optind > 2)
		bad_args("expected FILE [FILE2]");
	if (!o->maxop || o->maxop > FSX_MAX_OP)
		bad_args("-o must be between 1 and %llu", FSX_MAX_OP);
	if (o->growable && o->block_eof)
		bad_args("-g and -B contradict each other");
	if (!have_seed)
		o->seed = (uint32_t)(g_get_real_time() ^ ((int64_t)getpid() << 20));
}

int main(int argc, char **argv)
{
	static struct fsx fsx;
	struct fsx *x = &fsx;
	struct stat st0, st1;
	unsigned int i, fi;

	x->argc = argc;
	x->argv = argv;
	parse_args(x, argc, argv);
	x->nr_files = (unsigned int)(argc - optind);
	if (x->o.growable && !x->o.maxlen) {
		if (stat(argv[optind], &st0) < 0)
			bad_args("%s: %s", argv[optind], strerror(errno));
		x->o.maxlen = (uint64_t)st0.st_size + (1u << 20);
	}
	if (!x->o.maxlen)
		x->o.maxlen = UINT64_MAX;
	for (fi = 0; fi < x->nr_files; fi++)
		if (file_open(x, &x->files[fi], argv[optind + fi],
			      fi ? "FILE2" : "FILE") < 0)
			exit(2);
	if (x->nr_files == 2 && fstat(x->files[0].fd, &st0) == 0 &&
	    fstat(x->files[1].fd, &st1) == 0 && st0.st_ino == st1.st_ino &&
	    st0.st_dev == st1.st_dev)
		bad_args("FILE and FILE2 are the same file");
	for (fi = 0; fi < x->nr_files; fi++)
		if (!fsx_region(x, &x->files[fi]))
			bad_args("%s is empty (-g lets it grow)",
				 x->files[fi].path);

	set_weights(x);
	/* Ops across EOF reach up to 2 * maxop. */
	x->buf = g_malloc(2 * MAX(x->o.maxop, (uint64_t)FSX_CHUNK));
	if (x->o.dio && posix_memalign((void **)&x->dio_buf, FSX_DIO_ALIGN,
				       MAX(x->o.maxop, (uint64_t)FSX_DIO_ALIGN)))
		bad_args("out of memory");

	fsx_seed(x, x->o.seed);
	if (!x->o.quiet)
		printf("fsx: %s, size 0x%" PRIx64 "%s%s, %" PRIu64
		       " ops, seed %" PRIu64 "\n", x->files[0].path,
		       x->files[0].size, x->nr_files == 2 ? ", FILE2 " : "",
		       x->nr_files == 2 ? x->files[1].path : "", x->o.nr_ops,
		       x->o.seed);
	fflush(stdout);

	for (x->nr = 1; x->nr <= x->o.nr_ops; x->nr++) {
		fsx_run_op(x);
		if (x->nr == x->o.inject_at)
			fsx_inject(x);
		if (x->o.progress && x->nr % FSX_PROGRESS == 0) {
			printf("fsx: %" PRIu64 "/%" PRIu64 " ops\n", x->nr,
			       x->o.nr_ops);
			fflush(stdout);
		}
	}
	x->nr = x->o.nr_ops;
	for (fi = 0; fi < x->nr_files; fi++)
		fsx_verify_file(x, &x->files[fi]);
	if (!x->o.quiet) {
		printf("fsx: ops:");
		for (i = 0; i < NR_OPS; i++)
			if (x->counts[i] && i != OP_VERIFY)
				printf(" %s %" PRIu64, fsx_op_names[i],
				       x->counts[i]);
		printf("\n");
	}
	printf("fsx: %" PRIu64 " ops, seed %" PRIu64 ": OK\n", x->o.nr_ops,
	       x->o.seed);
	for (fi = 0; fi < x->nr_files; fi++) {
		if (x->files[fi].dio_fd >= 0)
			close(x->files[fi].dio_fd);
		if (close(x->files[fi].fd) < 0) {
			fprintf(stderr, "dioloop-fsx: close %s: %s\n",
				x->files[fi].path, strerror(errno));
			return 1;
		}
		g_free(x->files[fi].model);
	}
	free(x->dio_buf);
	g_free(x->buf);
	return 0;
}

