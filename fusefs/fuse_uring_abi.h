/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring: the kernel ABI (include/uapi/linux/fuse.h, protocol
 * 7.42, Linux 6.14+), which the linux/fuse.h this builds against (7.38)
 * does not have yet.  Names as the kernel spells them, prefixed.
 */
#ifndef DIOLOOP_FUSE_URING_ABI_H
#define DIOLOOP_FUSE_URING_ABI_H

#include <stdint.h>

/* INIT flag (in flags2): the daemon serves requests through io_uring. */
#define DIOLOOP_FUSE_OVER_IO_URING	(1ULL << 41)

#define DIOLOOP_FUSE_URING_IN_OUT_HEADER_SZ	128
#define DIOLOOP_FUSE_URING_OP_IN_OUT_SZ		128

/* Written by the kernel with a request, by the daemon with its reply. */
struct dioloop_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* to name the request in its reply */
	uint32_t payload_sz;	/* bytes in the payload buffer */
	uint32_t padding;
	uint64_t reserved;
};

/* A ring entry's header buffer (its first iovec). */
struct dioloop_fuse_uring_req_header {
	/* struct fuse_in_header (request) / fuse_out_header (reply) */
	char in_out[DIOLOOP_FUSE_URING_IN_OUT_HEADER_SZ];
	/* the request's first argument: the per-opcode header */
	char op_in[DIOLOOP_FUSE_URING_OP_IN_OUT_SZ];
	struct dioloop_fuse_uring_ent_in_out ring_ent_in_out;
};

/* sqe->cmd_op of an IORING_OP_URING_CMD on /dev/fuse. */
enum dioloop_fuse_uring_cmd {
	DIOLOOP_FUSE_IO_URING_CMD_INVALID = 0,
	/* hand a new entry to the kernel: it completes with a request */
	DIOLOOP_FUSE_IO_URING_CMD_REGISTER = 1,
	/* the reply to the entry's request, and wait for the next one */
	DIOLOOP_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* In the SQE's command area (IORING_SETUP_SQE128: 80 bytes). */
struct dioloop_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;	/* COMMIT_AND_FETCH: the request answered */
	uint16_t qid;		/* the queue: one per possible CPU */
	uint8_t padding[6];
};

_Static_assert(sizeof(struct dioloop_fuse_uring_req_header) == 288,
	       "fuse_uring_req_header is 288 bytes in the kernel's ABI");
_Static_assert(sizeof(struct dioloop_fuse_uring_cmd_req) == 24,
	       "fuse_uring_cmd_req is 24 bytes in the kernel's ABI");

#endif
