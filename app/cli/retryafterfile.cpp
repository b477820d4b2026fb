// RetryAfterFile: making, removing and sweeping up the files run's commands write a
// Retry-After to.

#include "retryafterfile.h"

#include "system/processprobe.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate::cli {

RetryAfterFile::RetryAfterFile(std::uint64_t pidNamespace)
{
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = tmp && tmp[0] == '/' ? tmp : "/tmp";
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    const std::string ours = "tollgate-retry-after-" + std::to_string(pidNamespace) + "-";
    removeOrphans(dir, ours);
    m_path = dir + "/" + ours + std::to_string(ProcessProbe::selfPid()) + "-XXXXXX";
    const int fd = ::mkostemp(m_path.data(), O_CLOEXEC);
    if (fd >= 0)
        ::close(fd);
    else
        m_path.clear();
}

RetryAfterFile::~RetryAfterFile()
{
    if (!m_path.empty())
        ::unlink(m_path.c_str());
}

void RetryAfterFile::removeOrphans(const std::string& dir, const std::string& ours)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        return;
    }
    int looked = 0;
    while (const dirent* e = ::readdir(d)) {
        if (++looked > 100000)
            break; // a huge directory: the rest waits for another run
        const std::string name = e->d_name;
        if (name.rfind(ours, 0) != 0)
            continue;
        char* end = nullptr;
        const long long pid = std::strtoll(name.c_str() + ours.size(), &end, 10);
        if (pid <= 0 || *end != '-' || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
            continue; // a runner that lives (or that we may not probe) keeps its file
        struct stat st
        {
        };
        if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)
            || st.st_uid != ::geteuid() || st.st_size > 65536)
            continue;
        ::unlinkat(fd, name.c_str(), 0);
    }
    ::closedir(d);
}

} // namespace tollgate::cli
