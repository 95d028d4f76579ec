/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The faces ntrdma.ko carries over its engine (struct ntrdma_face in
 * engine/ntrdma_engine.h); ntrdma_main.c lists them for the engine.
 */
#ifndef NTRDMA_FACES_H
#define NTRDMA_FACES_H

#include "ntrdma_engine.h"

extern const struct ntrdma_face ntrdma_net_face;	/* net/ntrdma_net.c */
extern const struct ntrdma_face ntrdma_ib_face;		/* ntrdma_ib.c */

#endif /* NTRDMA_FACES_H */
