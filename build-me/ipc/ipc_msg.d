build-me/ipc/ipc_msg.o: ipc/ipc_msg.c ipc/ipc_msg.h ipc/ipc.h
ipc/ipc_msg.h:
ipc/ipc.h:
