build-me/supervisor/sup.o: supervisor/sup.c common/log.h \
 privsep/privsep.h ipc/ipc.h supervisor/db.h ipc/ipc_msg.h ipc/ipc.h \
 supervisor/key.h supervisor/supervisor.h supervisor/config.h \
 supervisor/pgembed.h
common/log.h:
privsep/privsep.h:
ipc/ipc.h:
supervisor/db.h:
ipc/ipc_msg.h:
ipc/ipc.h:
supervisor/key.h:
supervisor/supervisor.h:
supervisor/config.h:
supervisor/pgembed.h:
