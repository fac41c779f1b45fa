/*
 * pause: the sandbox ("infrastructure") container of every pod. It holds the pod's
 * namespaces open, reaps the zombies that processes sharing its PID namespace leave
 * behind, and exits 0 on SIGINT or SIGTERM. Written for Statecraft; it does what
 * Kubernetes' own build/pause/linux/pause.c does.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef VERSION
#define VERSION "statecraft"
#endif

static void on_stop(int signo) {
  (void)signo;
  _exit(0);
}

static void on_child(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    printf("pause %s\n", VERSION);
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "warning: pause should be the first process of its PID namespace\n");

  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) pause();
}
