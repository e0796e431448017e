/*
 * The IPC message catalog: every message type, which roles may send it to
 * which, whether it carries a descriptor, and its body validator.  A frame
 * of an unknown type, from a role not allowed to send it, to a role not
 * allowed to receive it, or with a body its validator rejects closes the
 * channel.  Any change here bumps IPC_PROTO_VERSION in ipc.h.
 *
 * Bodies are msgpack arrays, fields in the order documented per type.
 */
#ifndef AGRIPPA_IPC_MSG_H
#define AGRIPPA_IPC_MSG_H

#include <limits.h>
#include <stdint.h>

#include "ipc.h"

#define CHILDREN_ALL                                                                        \
	(ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD) | ROLE_BIT(ROLE_PROXY) |              \
	    ROLE_BIT(ROLE_RUNNER) | ROLE_BIT(ROLE_SANDBOX) | ROLE_BIT(ROLE_GITHELPER))
#define DB_CALLERS                                                                          \
	(ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD) | ROLE_BIT(ROLE_PROXY) |              \
	    ROLE_BIT(ROLE_RUNNER))
#define SUP ROLE_BIT(ROLE_SUPERVISOR)
#define ANY_ROLE ((1u << ROLE__COUNT) - 1)

#define IPC_F_FD 0x1 /* the frame carries exactly one descriptor */

/* Limits the validators enforce. */
#define IPC_OPNAME_MAX 64
#define IPC_DB_MAXARGS 32
#define IPC_DB_ARG_MAX (1024 * 1024)
#define IPC_DB_MAXCOLS 256
#define IPC_DB_MAXROWS 10000
#define IPC_ERRMSG_MAX 1024
#define IPC_CTL_CMD_MAX 32
#define IPC_CTL_MAXARGS 16
#define IPC_CTL_ARG_MAX 4096
#define IPC_ADDR_MAX 256
#define IPC_INSTANCE_MAX 64

/*
 *  X(symbol, number, senders, receivers, flags)
 *
 *  HELLO       [proto u32, role u32, verbose u32, devmode bool, uid u32, gid u32,
 *               chroot str(<=PATH_MAX-1), instance str(<=IPC_INSTANCE_MAX)]
 *              first frame on every child channel; the child checks proto.
 *  READY       [proto u32, pid u32]   the child finished its setup.
 *  SHUTDOWN    []                     drain and exit.
 *  LOG_VERBOSE [level u32 (0..3)]
 *  DB_OP       [op str(<=IPC_OPNAME_MAX, [a-z0-9_]+), args array(<=IPC_DB_MAXARGS) of
 *               nil | bool | int | str(<=IPC_DB_ARG_MAX) | bin(<=IPC_DB_ARG_MAX)]
 *  DB_RESULT   [code u32, error str(<=IPC_ERRMSG_MAX), ncols u32(<=IPC_DB_MAXCOLS),
 *               rows array(<=IPC_DB_MAXROWS) of array(exactly ncols) of nil | str]
 *              code 0 = ok; see enum db_code.
 *  LISTEN_FD   [addr str(<=IPC_ADDR_MAX)]  + a listening socket.
 *  CHUNK       [stream u64, seq u32, last bool, data bin(<=IPC_CHUNK_SIZE)]
 *  CTL_REQUEST [cmd str(<=IPC_CTL_CMD_MAX), args array(<=IPC_CTL_MAXARGS) of
 *               str(<=IPC_CTL_ARG_MAX)]
 *  CTL_REPLY   [code u32, message str(<=IPC_ERRMSG_MAX*4), data any]
 *              code 0 = ok, otherwise an error and message says why.
 */
#define IPC_MSG_LIST(X)                                                                     \
	X(IMSG_HELLO, 1, SUP, CHILDREN_ALL, 0)                                              \
	X(IMSG_READY, 2, CHILDREN_ALL, SUP, 0)                                              \
	X(IMSG_SHUTDOWN, 3, SUP, CHILDREN_ALL, 0)                                           \
	X(IMSG_LOG_VERBOSE, 4, SUP, CHILDREN_ALL, 0)                                        \
	X(IMSG_DB_OP, 5, DB_CALLERS, SUP, 0)                                                \
	X(IMSG_DB_RESULT, 6, SUP, DB_CALLERS, 0)                                            \
	X(IMSG_LISTEN_FD, 7, SUP, ROLE_BIT(ROLE_HTTPD), IPC_F_FD)                            \
	X(IMSG_CHUNK, 8, ANY_ROLE, ANY_ROLE, 0)                                             \
	X(IMSG_CTL_REQUEST, 9, ROLE_BIT(ROLE_CTL), SUP, 0)                                  \
	X(IMSG_CTL_REPLY, 10, SUP, ROLE_BIT(ROLE_CTL), 0)

enum ipc_msg_type {
#define IPC_X_ENUM(sym, num, snd, rcv, fl) sym = num,
	IPC_MSG_LIST(IPC_X_ENUM)
#undef IPC_X_ENUM
	IMSG__MAX
};

enum db_code {
	DB_OK = 0,
	DB_ERR_UNKNOWN_OP = 1, /* no such operation */
	DB_ERR_DENIED = 2,     /* the caller's role may not call it */
	DB_ERR_ARGS = 3,       /* wrong argument count or type */
	DB_ERR_UNAVAILABLE = 4,/* no database connection */
	DB_ERR_QUERY = 5,      /* the statement failed (constraint, etc.) */
	DB_ERR_TOO_LARGE = 6,  /* result exceeds the reply limits */
};

struct ipc_msg_info {
	uint32_t type;
	const char *name;
	uint32_t senders;   /* ROLE_BIT mask */
	uint32_t receivers; /* ROLE_BIT mask */
	uint32_t flags;
	/* Returns 0 when body (an array) is valid for this type, -1 otherwise. */
	int (*validate)(const msgpack_object *body);
};

/* The catalog entry for type, or NULL when the type is unknown. */
const struct ipc_msg_info *ipc_msg_lookup(uint32_t type);
const char *ipc_msg_name(uint32_t type); /* "unknown" for unknown types */

/*
 * Full check of a decoded frame travelling from -> to: known type, roles
 * allowed, has_fd matching IPC_F_FD, body valid.  Returns 0 or -1 with *err
 * set to a static reason.
 */
int ipc_msg_check(const struct ipc_msg *m, enum ipc_role from, enum ipc_role to, int has_fd,
    const char **err);

/* Typed decoders: the validators are these with the result discarded.  Each
 * returns 0 or -1; strings point into the message and are not NUL-terminated
 * unless copied into a fixed array here. */
struct ipc_hello {
	uint32_t proto, role, verbose;
	int devmode;
	uint32_t uid, gid;
	char chroot[PATH_MAX];
	char instance[IPC_INSTANCE_MAX + 1];
};
int ipc_dec_hello(const msgpack_object *body, struct ipc_hello *out);

struct ipc_ready {
	uint32_t proto, pid;
};
int ipc_dec_ready(const msgpack_object *body, struct ipc_ready *out);

int ipc_dec_log_verbose(const msgpack_object *body, uint32_t *level);

struct ipc_db_op {
	char op[IPC_OPNAME_MAX + 1];
	struct ipc_cur args; /* positioned at the first argument */
	uint32_t nargs;
};
int ipc_dec_db_op(const msgpack_object *body, struct ipc_db_op *out);

struct ipc_db_result {
	uint32_t code, ncols, nrows;
	const char *error;
	size_t errlen;
	struct ipc_cur rows; /* each element: array of ncols nil|str */
};
int ipc_dec_db_result(const msgpack_object *body, struct ipc_db_result *out);

int ipc_dec_listen_fd(const msgpack_object *body, char *addr, size_t addrsz);

/* IMSG_CHUNK; data points into the message.  See ipc_asm_feed(). */
struct ipc_chunk {
	uint64_t stream;
	uint32_t seq;
	int last;
	const uint8_t *data;
	size_t len;
};
int ipc_dec_chunk(const msgpack_object *body, struct ipc_chunk *out);

struct ipc_ctl_request {
	char cmd[IPC_CTL_CMD_MAX + 1];
	struct ipc_cur args; /* each a str */
	uint32_t nargs;
};
int ipc_dec_ctl_request(const msgpack_object *body, struct ipc_ctl_request *out);

struct ipc_ctl_reply {
	uint32_t code;
	const char *message;
	size_t msglen;
	const msgpack_object *data;
};
int ipc_dec_ctl_reply(const msgpack_object *body, struct ipc_ctl_reply *out);

#endif
