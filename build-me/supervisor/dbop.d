build-me/supervisor/dbop.o: supervisor/dbop.c \
 /usr/include/postgresql/libpq-fe.h \
 /usr/include/postgresql/postgres_ext.h \
 /usr/include/postgresql/pg_config_ext.h common/log.h supervisor/db.h \
 ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h supervisor/supervisor.h \
 supervisor/config.h supervisor/pgembed.h
/usr/include/postgresql/libpq-fe.h:
/usr/include/postgresql/postgres_ext.h:
/usr/include/postgresql/pg_config_ext.h:
common/log.h:
supervisor/db.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
supervisor/supervisor.h:
supervisor/config.h:
supervisor/pgembed.h:
