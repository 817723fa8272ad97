/* SPDX-License-Identifier: MIT */
/* The I/O recorder hook (iorec.h): NULL unless a test installs one. */
#include "backends/iorec.h"

struct dioloop_iorec *_Atomic dioloop_iorec;
