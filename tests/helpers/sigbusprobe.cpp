// sigbusprobe: faults on truncated file mappings in a process of its own, for tst_sharedmapping
// (a SIGBUS that is not answered must kill this process, not the test):
//
//   sigbusprobe rescue FILE    a SharedMapping of FILE, truncated, then used: must live (0)
//   sigbusprobe foreign FILE   a plain mapping of FILE (not a SharedMapping), truncated, then
//                              used, while a SharedMapping of another file exists: must die
//                              by SIGBUS as without us
//   sigbusprobe chain FILE     the same, with a SIGBUS handler of its own installed first:
//                              that handler must get the fault (it exits 42)
//   sigbusprobe sent FILE      a SharedMapping exists, and SIGBUS is sent by kill(2): must die
//
// Exit codes: 0 survived as it should, 1 survived what should have killed it, 2 usage, 3 setup.

#include "system/fd.h"
#include "system/sharedmapping.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

using namespace tollgate;

namespace {

void chained(int, siginfo_t* info, void*)
{
    // Only the fault we caused: its address lies in the mapping we truncated.
    ::_exit(info && info->si_code == BUS_ADRERR ? 42 : 43);
}

// A file of one page, opened read-write.
Result<Fd> page(const std::string& path)
{
    auto fd = Fd::open(path, O_RDWR | O_CREAT, 0600);
    if (fd) {
        if (auto t = fd->truncate(4096); !t)
            return t.error();
    }
    return fd;
}

int fail(const char* what)
{
    std::fprintf(stderr, "sigbusprobe: %s: %s\n", what, std::strerror(errno));
    return 3;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 3)
        return 2;
    const std::string mode = argv[1];
    const std::string path = argv[2];
    if (mode == "chain") {
        struct sigaction sa
        {
        };
        sa.sa_sigaction = chained;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO;
        ::sigaction(SIGBUS, &sa, nullptr);
    }
    // Ours, registered (and the handler installed): another file for every mode but rescue.
    auto ownFd = page(mode == "rescue" ? path : path + ".own");
    if (!ownFd)
        return fail("open");
    auto own = SharedMapping::map(*ownFd, 4096);
    if (!own)
        return fail("map");
    auto* ownWord = static_cast<std::atomic<std::uint32_t>*>(own->data());
    ownWord->store(7);

    if (mode == "rescue") {
        if (!ownFd->truncate(0))
            return fail("truncate");
        ownWord->fetch_add(1); // faults: answered with a private zero page
        const bool ok = own->broken() && ownWord->load() == 1;
        std::printf("%s\n", ok ? "rescued" : "not rescued");
        return ok ? 0 : 1;
    }
    if (mode == "sent") {
        ::kill(::getpid(), SIGBUS);
        return 1;
    }
    if (mode != "foreign" && mode != "chain")
        return 2;
    auto fd = page(path);
    if (!fd)
        return fail("open");
    void* plain = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (plain == MAP_FAILED)
        return fail("mmap");
    auto* word = static_cast<volatile std::uint32_t*>(plain);
    if (!fd->truncate(0))
        return fail("truncate");
    *word = 1; // not ours: must fault as before
    return own->broken() ? 4 : 1; // alive: the handler swallowed a fault that was not its own
}
