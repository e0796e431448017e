build-me/supervisor/key.o: supervisor/key.c supervisor/key.h
supervisor/key.h:
