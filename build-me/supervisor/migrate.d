build-me/supervisor/migrate.o: supervisor/migrate.c \
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
