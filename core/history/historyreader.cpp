#include "history/historyreader.h"

#include "history/historylog.h"
#include "system/homedir.h"

#include <fcntl.h>
#include <sys/stat.h>

namespace tollgate {

void HistoryReader::parseLines(std::string_view text, Batch& out, std::size_t& consumed)
{
    consumed = 0;
    while (consumed < text.size()) {
        const auto nl = text.find('\n', consumed);
        if (nl == std::string_view::npos) {
            if (text.size() - consumed > MAX_LINE) { // a runaway line: skip what we have
                ++out.badLines;
                consumed = text.size();
            }
            return;
        }
        const auto line = text.substr(consumed, nl - consumed);
        consumed = nl + 1;
        if (line.empty())
            continue;
        auto e = HistoryEvent::fromJsonLine(line);
        if (e)
            out.events.push_back(std::move(e).value());
        else
            ++out.badLines;
    }
}

Result<void> HistoryReader::readFrom(
    const Fd& home, const char* name, ino_t expectIno, off_t& offset, Batch& out, bool requireIno)
{
    auto opened = HomeDir::openIfThere(home, name, O_RDONLY);
    if (!opened)
        return opened.error();
    if (!*opened)
        return {};
    const Fd* fd = &**opened;
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (requireIno && st->st_ino != expectIno)
        return {};
    if (!requireIno && st->st_ino != expectIno)
        offset = 0;
    if (st->st_size < offset)
        offset = 0; // truncated by hand: start over
    bool resync = false;
    if (st->st_size - offset > MAX_UNREAD) {
        out.skippedBytes += static_cast<std::uint64_t>(st->st_size - MAX_UNREAD - offset);
        offset = st->st_size - MAX_UNREAD;
        resync = true; // we landed mid-line: drop up to the first newline
    }
    std::string buf;
    const std::size_t chunk = 1 << 20;
    for (;;) {
        const std::size_t old = buf.size();
        buf.resize(old + chunk);
        auto n = fd->preadSome(buf.data() + old, chunk, offset + static_cast<off_t>(old));
        if (!n)
            return n.error();
        buf.resize(old + *n);
        if (*n == 0)
            break;
        if (resync) {
            const auto nl = buf.find('\n');
            if (nl == std::string::npos) {
                offset += static_cast<off_t>(buf.size());
                buf.clear();
                continue;
            }
            offset += static_cast<off_t>(nl + 1);
            buf.erase(0, nl + 1);
            resync = false;
        }
        std::size_t consumed = 0;
        parseLines(buf, out, consumed);
        offset += static_cast<off_t>(consumed);
        buf.erase(0, consumed);
    }
    if (!requireIno)
        m_ino = st->st_ino;
    return {};
}

Result<HistoryReader::Batch> HistoryReader::poll()
{
    auto home = HomeDir::open(m_dir, false);
    if (!home) {
        if (home.error().sysErrno == ENOENT)
            return Batch {};
        return home.error();
    }
    return poll(*home);
}

Result<HistoryReader::Batch> HistoryReader::poll(const Fd& home)
{
    Batch out;
    struct stat named
    {
    };
    const bool exists = ::fstatat(home.get(), HistoryLog::CURRENT, &named, AT_SYMLINK_NOFOLLOW) == 0;
    if (!m_started) {
        m_started = true;
        off_t prevOffset = 0;
        struct stat prevSt
        {
        };
        if (::fstatat(home.get(), HistoryLog::PREVIOUS, &prevSt, AT_SYMLINK_NOFOLLOW) == 0) {
            if (auto r = readFrom(home, HistoryLog::PREVIOUS, prevSt.st_ino, prevOffset, out, true); !r)
                return r.error();
        }
    } else if (m_ino != 0 && (!exists || named.st_ino != m_ino)) {
        // Rotated since last time: finish the old generation (now history.1.jsonl) first.
        if (auto r = readFrom(home, HistoryLog::PREVIOUS, m_ino, m_offset, out, true); !r)
            return r.error();
        m_offset = 0;
    }
    if (auto r = readFrom(home, HistoryLog::CURRENT, m_ino, m_offset, out, false); !r)
        return r.error();
    return out;
}

} // namespace tollgate
