build-me/supervisor/proc.o: supervisor/proc.c common/child.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h common/log.h supervisor/supervisor.h \
 supervisor/config.h supervisor/pgembed.h
common/child.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
supervisor/supervisor.h:
supervisor/config.h:
supervisor/pgembed.h:
