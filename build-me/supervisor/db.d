build-me/supervisor/db.o: supervisor/db.c \
 /usr/include/postgresql/libpq-fe.h \
 /usr/include/postgresql/postgres_ext.h \
 /usr/include/postgresql/pg_config_ext.h common/log.h supervisor/db.h \
 ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h
/usr/include/postgresql/libpq-fe.h:
/usr/include/postgresql/postgres_ext.h:
/usr/include/postgresql/pg_config_ext.h:
common/log.h:
supervisor/db.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
