build-me/common/child.o: common/child.c common/child.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h common/log.h privsep/privsep.h
common/child.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
privsep/privsep.h:
