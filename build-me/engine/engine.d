build-me/engine/engine.o: engine/engine.c common/child.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h common/log.h engine/engine.h
common/child.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
engine/engine.h:
