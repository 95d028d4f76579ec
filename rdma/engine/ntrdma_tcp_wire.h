/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA over TCP: the record stream each side sends the other, and the
 * pure checks the receiver applies before it acts on a record. The engine
 * runs in windowed mode over TCP: its stores into the peer's window
 * (inbox, receive buffers), scratchpads and doorbells travel as records,
 * and the receiver applies them to its own window buffer. Self-contained C
 * shared with the unit tests; the includer provides the fixed-width types.
 *
 * A record is a 16-byte header, then len payload bytes. The header, all
 * fields little-endian:
 *
 *	byte 0	type	NTRDMA_TCP_*
 *	byte 1	flags	0 (none defined)
 *	byte 2	ver	u16: NTRDMA_VERSION in HELLO, else 0
 *	byte 4	a	u32
 *	byte 8	b	u32
 *	byte 12	len	u32: payload bytes after the header
 *
 *	type	a		b		len
 *	HELLO	NTRDMA_MAGIC	inbox size	0
 *	SPAD	index		value		0
 *	DB	bit		0		0
 *	WRITE	window offset	0		1..NTRDMA_TCP_WRITE_MAX
 *
 * HELLO is the first record each way on a connection, and only the first.
 * NTRDMA_VERSION covers this format. A record that fails a check ends the
 * connection.
 */
#ifndef NTRDMA_TCP_WIRE_H
#define NTRDMA_TCP_WIRE_H

#include "ntrdma_wire.h"

#define NTRDMA_TCP_HDR_LEN	16u
/* The largest WRITE payload; a longer store goes as several records. */
#define NTRDMA_TCP_WRITE_MAX	0x10000u

enum ntrdma_tcp_type {
	NTRDMA_TCP_HELLO = 1,	/* magic, version and inbox size */
	NTRDMA_TCP_SPAD,	/* a store into the receiver's scratchpad */
	NTRDMA_TCP_DB,		/* a doorbell, rung after the records before it */
	NTRDMA_TCP_WRITE,	/* a store into the receiver's window */
	NTRDMA_TCP_TYPES
};

/* Why a check failed: each failure has its own code. */
enum ntrdma_tcp_err {
	NTRDMA_TCP_BAD_TYPE = -1,	/* unknown type */
	NTRDMA_TCP_BAD_ORDER = -2,	/* HELLO later, or a first record not HELLO */
	NTRDMA_TCP_BAD_RSVD = -3,	/* a field the type leaves unused is set */
	NTRDMA_TCP_BAD_MAGIC = -4,
	NTRDMA_TCP_BAD_VERSION = -5,
	NTRDMA_TCP_BAD_INBOX_SIZE = -6,
	NTRDMA_TCP_BAD_FIELD = -7,	/* index, bit or offset */
	NTRDMA_TCP_BAD_LEN = -8,	/* payload length out of range */
};

/* A record header in host order. */
struct ntrdma_tcp_hdr {
	u8 type;
	u8 flags;
	u16 ver;
	u32 a;
	u32 b;
	u32 len;
};

static inline void ntrdma_tcp_put16(u8 *p, u16 v)
{
	p[0] = (u8)v;
	p[1] = (u8)(v >> 8);
}

static inline void ntrdma_tcp_put32(u8 *p, u32 v)
{
	ntrdma_tcp_put16(p, (u16)v);
	ntrdma_tcp_put16(p + 2, (u16)(v >> 16));
}

static inline u16 ntrdma_tcp_get16(const u8 *p)
{
	return (u16)(p[0] | p[1] << 8);
}

static inline u32 ntrdma_tcp_get32(const u8 *p)
{
	return ntrdma_tcp_get16(p) | (u32)ntrdma_tcp_get16(p + 2) << 16;
}

static inline void ntrdma_tcp_pack(const struct ntrdma_tcp_hdr *h,
				   u8 buf[NTRDMA_TCP_HDR_LEN])
{
	buf[0] = h->type;
	buf[1] = h->flags;
	ntrdma_tcp_put16(buf + 2, h->ver);
	ntrdma_tcp_put32(buf + 4, h->a);
	ntrdma_tcp_put32(buf + 8, h->b);
	ntrdma_tcp_put32(buf + 12, h->len);
}

static inline void ntrdma_tcp_unpack(const u8 buf[NTRDMA_TCP_HDR_LEN],
				     struct ntrdma_tcp_hdr *h)
{
	h->type = buf[0];
	h->flags = buf[1];
	h->ver = ntrdma_tcp_get16(buf + 2);
	h->a = ntrdma_tcp_get32(buf + 4);
	h->b = ntrdma_tcp_get32(buf + 8);
	h->len = ntrdma_tcp_get32(buf + 12);
}

/* ---- pure checks, shared with the unit tests ---- */

static inline int ntrdma_tcp_check_hello(const struct ntrdma_tcp_hdr *h)
{
	if (h->a != NTRDMA_MAGIC)
		return NTRDMA_TCP_BAD_MAGIC;
	if (h->ver != NTRDMA_VERSION)
		return NTRDMA_TCP_BAD_VERSION;
	if (h->b != sizeof(struct ntrdma_inbox))
		return NTRDMA_TCP_BAD_INBOX_SIZE;
	return h->len ? NTRDMA_TCP_BAD_LEN : 0;
}

static inline int ntrdma_tcp_check_spad(const struct ntrdma_tcp_hdr *h)
{
	if (h->a >= NTRDMA_SPAD_COUNT)
		return NTRDMA_TCP_BAD_FIELD;
	return h->len ? NTRDMA_TCP_BAD_LEN : 0;
}

static inline int ntrdma_tcp_check_db(const struct ntrdma_tcp_hdr *h)
{
	if (h->b)
		return NTRDMA_TCP_BAD_RSVD;
	if (h->a != NTRDMA_DB_VDB && h->a != NTRDMA_DB_CTRL)
		return NTRDMA_TCP_BAD_FIELD;
	return h->len ? NTRDMA_TCP_BAD_LEN : 0;
}

static inline int ntrdma_tcp_check_write_hdr(const struct ntrdma_tcp_hdr *h)
{
	if (h->b)
		return NTRDMA_TCP_BAD_RSVD;
	if (!h->len || h->len > NTRDMA_TCP_WRITE_MAX)
		return NTRDMA_TCP_BAD_LEN;
	return 0;
}

static inline int ntrdma_tcp_check_fields(const struct ntrdma_tcp_hdr *h)
{
	switch (h->type) {
	case NTRDMA_TCP_HELLO:
		return ntrdma_tcp_check_hello(h);
	case NTRDMA_TCP_SPAD:
		return ntrdma_tcp_check_spad(h);
	case NTRDMA_TCP_DB:
		return ntrdma_tcp_check_db(h);
	case NTRDMA_TCP_WRITE:
		return ntrdma_tcp_check_write_hdr(h);
	}
	return NTRDMA_TCP_BAD_TYPE;
}

/*
 * A header as received; @first is nonzero for a connection's first record.
 * 0 when the receiver may read its payload. A WRITE header also needs
 * ntrdma_tcp_check_write() against the receiver's window.
 */
static inline int ntrdma_tcp_check_hdr(const struct ntrdma_tcp_hdr *h,
				       int first)
{
	int hello = h->type == NTRDMA_TCP_HELLO;

	if (!h->type || h->type >= NTRDMA_TCP_TYPES)
		return NTRDMA_TCP_BAD_TYPE;
	if (hello != !!first)
		return NTRDMA_TCP_BAD_ORDER;
	if (h->flags || (h->ver && !hello))
		return NTRDMA_TCP_BAD_RSVD;
	return ntrdma_tcp_check_fields(h);
}

/*
 * A WRITE header (that passed ntrdma_tcp_check_hdr()) against the
 * receiver's open window of @window bytes: the store lies inside it, and
 * its end cannot wrap.
 */
static inline int ntrdma_tcp_check_write(const struct ntrdma_tcp_hdr *h,
					 u32 window)
{
	if (h->len > window || h->a > window - h->len)
		return NTRDMA_TCP_BAD_FIELD;
	return 0;
}

#endif /* NTRDMA_TCP_WIRE_H */
