build-me/ctl/agrippactl.o: ctl/agrippactl.c common/log.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h
common/log.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
