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

Result<void> HistoryReader::readFrom(const Fd& fd, off_t size, off_t& offset, Batch& out)
{
    if (size < offset)
        offset = 0; // truncated by hand: start over
    bool resync = false;
    if (size - offset > MAX_UNREAD) {
        out.skippedBytes += static_cast<std::uint64_t>(size - MAX_UNREAD - offset);
        offset = size - MAX_UNREAD;
        resync = true; // we landed mid-line: drop up to the first newline
    }
    std::string buf;
    const std::size_t chunk = 1 << 20;
    for (;;) {
        const std::size_t old = buf.size();
        buf.resize(old + chunk);
        auto n = fd.preadSome(buf.data() + old, chunk, offset + static_cast<off_t>(old));
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
    return {};
}

Result<std::optional<HistoryReader::Generation>> HistoryReader::openGeneration(
    const Fd& home, const char* name)
{
    auto opened = HomeDir::openIfThere(home, name, O_RDONLY);
    if (!opened)
        return opened.error();
    if (!*opened)
        return std::optional<Generation>();
    auto st = (*opened)->stat();
    if (!st)
        return st.error();
    return std::optional<Generation>(Generation { std::move(**opened), st->st_ino, st->st_size });
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
    // history.jsonl is opened first and judged by the inode of what was opened, not by a name
    // looked up beforehand: a rotation in between would otherwise drop the unread tail of the
    // old generation.
    auto current = openGeneration(home, HistoryLog::CURRENT);
    if (!current)
        return current.error();
    const ino_t currentIno = *current ? (*current)->ino : 0;
    if (m_ino != 0 && currentIno != m_ino) {
        // Rotated since last time: finish the old generation (now history.1.jsonl) first,
        // unless it is gone too (two rotations between two polls).
        auto previous = openGeneration(home, HistoryLog::PREVIOUS);
        if (!previous)
            return previous.error();
        if (*previous && (*previous)->ino == m_ino) {
            if (auto r = readFrom((*previous)->fd, (*previous)->size, m_offset, out); !r)
                return r.error();
        }
        // Finished with that inode for good. Just after a rotation history.jsonl may not exist
        // yet; following the old inode then would make the next poll "finish" it again.
        m_finishedIno = m_ino;
        m_ino = 0;
        m_offset = 0;
    } else if (m_ino == 0) {
        // Following no generation yet (the first call, or history.jsonl was missing): a
        // previous generation not read yet is read whole first. A short-lived history.jsonl
        // can be created, filled and rotated entirely between two polls.
        auto previous = openGeneration(home, HistoryLog::PREVIOUS);
        if (!previous)
            return previous.error();
        // (If it is the file just opened as history.jsonl, a rotation came in between: it is
        // read below, once.)
        if (*previous && (*previous)->ino != m_finishedIno && (*previous)->ino != currentIno) {
            off_t from = 0;
            if (auto r = readFrom((*previous)->fd, (*previous)->size, from, out); !r)
                return r.error();
            m_finishedIno = (*previous)->ino;
        }
    }
    if (*current) {
        if (currentIno != m_ino)
            m_offset = 0;
        if (auto r = readFrom((*current)->fd, (*current)->size, m_offset, out); !r)
            return r.error();
        m_ino = currentIno;
    }
    return out;
}

} // namespace tollgate
