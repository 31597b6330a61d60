/*
 * LD_PRELOAD shim for testing: when the file $AOSHIM_REQ exists ("HVA CODE"),
 * QEMU's main thread, at its next ppoll(), sends itself SIGBUS with the
 * siginfo the kernel's memory_failure() gives (si_code CODE, si_addr HVA):
 * only a thread sending to itself may use a positive si_code, hence the
 * shim.  The signal stays pending (the main thread blocks SIGBUS) and the
 * main loop reads it from its signalfd, as it would the kernel's AO.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void maybe_send(void)
{
    const char *req = getenv("AOSHIM_REQ");
    FILE *f;
    unsigned long addr;
    int code;
    siginfo_t si;

    if (!req || gettid() != getpid()) {
        return;
    }
    f = fopen(req, "r");
    if (!f) {
        return;
    }
    if (fscanf(f, "%lx %d", &addr, &code) != 2) {
        fclose(f);
        return;
    }
    fclose(f);
    unlink(req);
    memset(&si, 0, sizeof(si));
    si.si_signo = SIGBUS;
    si.si_code = code;
    si.si_addr = (void *)addr;
    si.si_addr_lsb = 12;
    fprintf(stderr, "aoshim: SIGBUS code %d addr %#lx to self: %ld\n", code,
            addr, syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGBUS,
                          &si));
}

int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
          const sigset_t *mask)
{
    static int (*real)(struct pollfd *, nfds_t, const struct timespec *,
                       const sigset_t *);

    if (!real) {
        real = dlsym(RTLD_NEXT, "ppoll");
    }
    maybe_send();
    return real(fds, nfds, tmo, mask);
}
