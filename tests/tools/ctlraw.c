/*
 * ctlraw SOCKET KIND: send a malformed request to the control socket and
 * print the daemon's reply as "code=N message=TEXT" (or "no reply").  KIND:
 *   garbage | oversized | wrongtype | badbody | unknowncmd | badargs
 * Exit 0 when an error reply (code != 0) arrived, 1 otherwise.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

static int
ctl_connect(const char *path)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		perror(path);
		exit(2);
	}
	return fd;
}

static int
send_kind(int fd, const char *kind)
{
	static const unsigned char garbage[] = { 0, 0, 0, 4, 0xc1, 0xde, 0xad, 0x00 };
	static const unsigned char oversized[] = { 0x7f, 0x00, 0x00, 0x00, 0x83 };
	struct ipc_wbuf w;

	if (strcmp(kind, "garbage") == 0)
		return write(fd, garbage, sizeof(garbage)) == (ssize_t)sizeof(garbage) ? 0 : -1;
	if (strcmp(kind, "oversized") == 0)
		return write(fd, oversized, sizeof(oversized)) == (ssize_t)sizeof(oversized) ? 0
											     : -1;
	if (strcmp(kind, "wrongtype") == 0) {
		ipc_wbuf_begin(&w, IMSG_DB_OP, 1, 2); /* not a control message */
		ipc_put_str(&w, "health");
		ipc_put_array(&w, 0);
	} else if (strcmp(kind, "badbody") == 0) {
		ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 3); /* one field too many */
		ipc_put_str(&w, "status");
		ipc_put_array(&w, 0);
		ipc_put_u64(&w, 1);
	} else if (strcmp(kind, "unknowncmd") == 0) {
		ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
		ipc_put_str(&w, "selfdestruct");
		ipc_put_array(&w, 0);
	} else if (strcmp(kind, "badargs") == 0) {
		ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
		ipc_put_str(&w, "log");
		ipc_put_array(&w, 1);
		ipc_put_str(&w, "loud");
	} else
		return -1;
	int rv = -1;

	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == 0)
		rv = write(fd, w.sb.data, w.sb.size) == (ssize_t)w.sb.size ? 0 : -1;
	ipc_wbuf_free(&w);
	return rv;
}

int
main(int argc, char *argv[])
{
	struct ipc_ctl_reply r;
	struct ipc_msg m;
	const char *err;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: ctlraw SOCKET KIND\n");
		return 2;
	}
	fd = ctl_connect(argv[1]);
	if (send_kind(fd, argv[2]) == -1) {
		fprintf(stderr, "ctlraw: cannot send %s\n", argv[2]);
		return 2;
	}
	int rv;

	if (ipc_read_frame(fd, ROLE_CTL, ROLE_SUPERVISOR, 1 << 20, 5000, &m, &err) == -1) {
		printf("no reply\n");
		return 1;
	}
	if (ipc_dec_ctl_reply(m.body, &r) == -1) {
		printf("malformed reply\n");
		ipc_msg_free(&m);
		return 1;
	}
	printf("code=%u message=%.*s\n", r.code, (int)r.msglen, r.message);
	rv = r.code != 0 ? 0 : 1;
	ipc_msg_free(&m);
	close(fd);
	return rv;
}
