build-me/ipc/ipc_chunk.o: ipc/ipc_chunk.c ipc/ipc_msg.h ipc/ipc.h
ipc/ipc_msg.h:
ipc/ipc.h:
