/* SPDX-License-Identifier: MIT */
/*
 * dioloop-fsx: the op log (a ring of the last FSX_LOG_SIZE ops) and the
 * failure reports built from it.
 */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/fsx/fsx.h"

const char *const fsx_op_names[NR_OPS] = {
	[OP_READ] = "read",		[OP_READ_EOF] = "read_eof",
	[OP_WRITE] = "write",		[OP_WRITE_EOF] = "write_eof",
	[OP_PUNCH] = "punch_hole",	[OP_ZERO] = "zero_range",
	[OP_ALLOC] = "allocate",	[OP_COPY_EOF] = "copy_eof",
	[OP_FSYNC] = "fsync",		[OP_FDATASYNC] = "fdatasync",
	[OP_COPY] = "copy_range",	[OP_SEEK] = "seek",
	[OP_DIO_READ] = "dio_read",	[OP_DIO_WRITE] = "dio_write",
	[OP_TRUNCATE] = "truncate",	[OP_INJECT] = "inject",
	[OP_MAP_READ] = "map_read",	[OP_MAP_WRITE] = "map_write",
	[OP_VERIFY] = "verify",
};

/* Start a log entry for the op about to run. */
struct fsx_log *fsx_log_op(struct fsx *x, enum fsx_op op,
			   const struct fsx_file *f, uint64_t off, uint64_t len)
{
	struct fsx_log *l = &x->log[x->nr_logged++ % FSX_LOG_SIZE];

	*l = (struct fsx_log){ .nr = x->nr, .op = op,
			       .file = fsx_file_index(x, f), .off = off,
			       .len = len };
	x->counts[op]++;
	return l;
}

/* The op of entry l returned res. */
void fsx_log_done(struct fsx_log *l, int64_t res)
{
	l->res = res;
	l->done = true;
}

/* A result as text: an errno name, or the value (hex for offsets). */
static const char *fmt_res(char *buf, size_t n, int64_t v, bool hex)
{
	if (v < 0) {
		const char *name = strerrorname_np((int)-v);

		if (name)
			snprintf(buf, n, "%s", name);
		else
			snprintf(buf, n, "errno %" PRId64, -v);
	} else {
		snprintf(buf, n, hex ? "0x%" PRIx64 : "%" PRId64, v);
	}
	return buf;
}

/* One log entry as one line. */
static void fsx_log_print(const struct fsx *x, FILE *out,
			  const struct fsx_log *l)
{
	const char *name = x->files[l->file].name;
	char r1[32], r2[32];

	fprintf(out, "  %8" PRIu64 " %-10s %-5s ", l->nr, fsx_op_names[l->op],
		name);
	switch (l->op) {
	case OP_FSYNC:
	case OP_FDATASYNC:
		break;
	case OP_TRUNCATE:
		fprintf(out, "to 0x%" PRIx64, l->off);
		break;
	case OP_INJECT:
		fprintf(out, "0x%" PRIx64 " (model byte flipped)", l->off);
		break;
	case OP_COPY:
	case OP_COPY_EOF:
		fprintf(out, "0x%" PRIx64 " -> %s 0x%" PRIx64 " len 0x%" PRIx64,
			l->off, x->files[l->file2].name, l->off2, l->len);
		break;
	case OP_SEEK:
		fprintf(out, "0x%" PRIx64, l->off);
		if (l->done)
			fprintf(out, ": data %s, hole %s",
				fmt_res(r1, sizeof(r1), l->res, true),
				fmt_res(r2, sizeof(r2), l->res2, true));
		break;
	default:
		fprintf(out, "0x%" PRIx64 " len 0x%" PRIx64 "%s", l->off, l->len,
			l->zeros ? " (zeros)" : "");
		break;
	}
	if (l->op != OP_SEEK && l->op != OP_INJECT && l->done)
		fprintf(out, " = %s", fmt_res(r1, sizeof(r1), l->res, false));
	else if (!l->done && l->op != OP_INJECT)
		fprintf(out, " (running)");
	fputc('\n', out);
}

/* Seed, how to repeat the run, and the op log; then exit 1. */
_Noreturn void fsx_report_exit(struct fsx *x)
{
	uint64_t n = MIN(x->nr_logged, (uint64_t)FSX_LOG_SIZE), i;
	int a;

	fprintf(stderr, "fsx: seed %" PRIu64 ", failed at op %" PRIu64 "\n",
		x->o.seed, x->nr);
	fprintf(stderr, "fsx: repeat with: %s -S %" PRIu64, x->argv[0],
		x->o.seed);
	for (a = 1; a < x->argc; a++) {
		if (!strcmp(x->argv[a], "-S")) {
			a++;
			continue;
		}
		if (!strncmp(x->argv[a], "-S", 2))
			continue;
		fprintf(stderr, " %s", x->argv[a]);
	}
	fprintf(stderr, "\nfsx: the last %" PRIu64 " ops, oldest first:\n", n);
	for (i = x->nr_logged - n; i < x->nr_logged; i++)
		fsx_log_print(x, stderr, &x->log[i % FSX_LOG_SIZE]);
	exit(1);
}

/* "FAILED: reason", then the report; exit 1. */
_Noreturn void fsx_fail(struct fsx *x, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "fsx: FAILED: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fsx_report_exit(x);
}

/* Rows of 16 bytes of buf (file offset base), from row to row + rows*16,
 * marking the rows that differ from other. */
static void hexdump(const char *what, const uint8_t *buf, const uint8_t *other,
		    uint64_t base, size_t len, uint64_t row, unsigned int rows)
{
	unsigned int r, i;

	fprintf(stderr, "fsx: %s:\n", what);
	for (r = 0; r < rows; r++, row += 16) {
		bool differs = false;

		if (row >= base + len)
			break;
		fprintf(stderr, "  0x%010" PRIx64 " ", row);
		for (i = 0; i < 16; i++) {
			uint64_t pos = row + i;

			if (pos < base || pos >= base + len) {
				fprintf(stderr, "   ");
				continue;
			}
			fprintf(stderr, " %02x", buf[pos - base]);
			differs |= buf[pos - base] != other[pos - base];
		}
		fprintf(stderr, "%s\n", differs ? "  <" : "");
	}
}

/* The newest logged op that changed offset pos of file fi, or NULL. */
static const struct fsx_log *last_writer(const struct fsx *x, unsigned int fi,
					 uint64_t pos)
{
	uint64_t n = MIN(x->nr_logged, (uint64_t)FSX_LOG_SIZE), i;

	for (i = 0; i < n; i++) {
		const struct fsx_log *l =
			&x->log[(x->nr_logged - 1 - i) % FSX_LOG_SIZE];
		bool copy = l->op == OP_COPY || l->op == OP_COPY_EOF;
		uint64_t off = copy ? l->off2 : l->off;
		unsigned int f = copy ? l->file2 : l->file;
		uint64_t len = l->op == OP_INJECT ? 1 : l->len;

		if (l->op != OP_INJECT && (!l->done || l->res < 0))
			continue;
		switch (l->op) {
		case OP_WRITE: case OP_WRITE_EOF: case OP_PUNCH: case OP_ZERO:
		case OP_COPY: case OP_COPY_EOF: case OP_DIO_WRITE:
		case OP_MAP_WRITE:
		case OP_INJECT:
			if (f == fi && pos >= off && pos - off < len)
				return l;
			break;
		case OP_TRUNCATE:
			if (l->file == fi && pos >= l->off)
				return l;
			break;
		default:
			break;
		}
	}
	return NULL;
}

/* Compare got with the model at off; on a difference, report and exit. */
void fsx_check_data(struct fsx *x, struct fsx_file *f, uint64_t off,
		    const uint8_t *got, size_t len, const char *how)
{
	const uint8_t *want = f->model + off;
	const struct fsx_log *w;
	size_t i, first = 0, last = 0, bad = 0;
	uint64_t row;

	if (!memcmp(want, got, len))
		return;
	for (i = 0; i < len; i++) {
		if (want[i] == got[i])
			continue;
		if (!bad++)
			first = i;
		last = i;
	}
	fflush(stdout);
	fprintf(stderr, "fsx: MISMATCH: %s of %s (%s) at 0x%" PRIx64
		" len 0x%zx: %zu bytes differ in [0x%" PRIx64 ", 0x%" PRIx64
		"]\n", how, f->name, f->path, off, len, bad, off + first,
		off + last);
	fprintf(stderr, "fsx: first differing offset 0x%" PRIx64
		": expected 0x%02x, got 0x%02x\n", off + first, want[first],
		got[first]);
	row = (off + first) & ~(uint64_t)15;
	row = row >= 16 ? row - 16 : 0;
	hexdump("expected (model)", want, got, off, len, row, 4);
	hexdump("got (file)", got, want, off, len, row, 4);
	w = last_writer(x, fsx_file_index(x, f), off + first);
	if (w) {
		fprintf(stderr, "fsx: the last logged op that changed it:\n");
		fsx_log_print(x, stderr, w);
	} else {
		fprintf(stderr, "fsx: no logged op changed it\n");
	}
	fsx_report_exit(x);
}

