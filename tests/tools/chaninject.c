/*
 * chaninject PID KIND: play a compromised child.  Takes a duplicate of the
 * child's supervisor channel (fd 3) with pidfd_getfd(2) and writes a forged
 * frame into it, exactly as the child itself could.  KIND:
 *   forbidden   a well-formed IMSG_CTL_REPLY (a type no child may send)
 *   garbage     bytes that are not msgpack
 *   oversized   a length prefix above the channel limit
 *   denied-op   a well-formed DB_OP for an op the child's role may not call
 * Exit 0 when the frame was written.
 */
#include <sys/syscall.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

static int
grab_fd(pid_t pid, int target)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd == -1) {
		perror("pidfd_open");
		exit(2);
	}
	int fd = (int)syscall(SYS_pidfd_getfd, pfd, target, 0);
	if (fd == -1) {
		perror("pidfd_getfd");
		exit(2);
	}
	close(pfd);
	return fd;
}

int
main(int argc, char *argv[])
{
	struct ipc_wbuf w;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: chaninject PID forbidden|garbage|oversized|denied-op\n");
		return 2;
	}
	fd = grab_fd((pid_t)atoi(argv[1]), 3);
	if (strcmp(argv[2], "garbage") == 0) {
		static const unsigned char g[] = { 0, 0, 0, 6, 0xc1, 0xc1, 0xff, 0x00, 0x12, 0x34 };
		return write(fd, g, sizeof(g)) == (ssize_t)sizeof(g) ? 0 : 1;
	}
	if (strcmp(argv[2], "oversized") == 0) {
		static const unsigned char g[] = { 0x7f, 0xff, 0xff, 0xff, 0x83 };
		return write(fd, g, sizeof(g)) == (ssize_t)sizeof(g) ? 0 : 1;
	}
	if (strcmp(argv[2], "forbidden") == 0) {
		ipc_wbuf_begin(&w, IMSG_CTL_REPLY, 7, 3);
		ipc_put_u64(&w, 0);
		ipc_put_str(&w, "forged");
		ipc_put_nil(&w);
	} else if (strcmp(argv[2], "denied-op") == 0) {
		ipc_wbuf_begin(&w, IMSG_DB_OP, 99, 2);
		ipc_put_str(&w, "engine_heartbeat");
		ipc_put_array(&w, 3);
		ipc_put_str(&w, "engine-0000000000000000");
		ipc_put_str(&w, "forged");
		ipc_put_u64(&w, 1);
	} else {
		fprintf(stderr, "chaninject: unknown kind %s\n", argv[2]);
		return 2;
	}
	if (ipc_wbuf_finish(&w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(fd, &w, -1) == -1)
		return 1;
	ipc_wbuf_free(&w);
	return 0;
}
