#include "quotaactions.h"

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/textsanitizer.h"
#include "corebridge.h"
#include "lock/lockfile.h"
#include "quota/quotapolicy.h"
#include "quotaobserver.h"

#include <QFile>
#include <QFileInfo>
#include <algorithm>

namespace tollgate::ui {

namespace {

// Lock files are removed by "clean" only once older than this (LockFile's stale rule needs a
// positive age), so a lock whose holder died a moment ago is re-judged under its flock.
constexpr std::int64_t CLEAN_AGE_SECONDS = 1;

} // namespace

QuotaActions::QuotaActions(QString home, QStringList lockDirs, bool isRedis, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
    , m_lockDirs(std::move(lockDirs))
    , m_isRedis(isRedis)
{
}

QuotaActions::~QuotaActions() = default;

QString QuotaActions::who()
{
    return QStringLiteral("tollgate-dashboard (pid %1)").arg(ProcessProbe::selfPid());
}

QString QuotaActions::openLimiter()
{
    // A directory home by its inode now (the observer's may be a moment old); a Redis home as
    // the observer last found it (1 while there).
    const quint64 ino = m_isRedis ? m_homeInode : inodeOf(m_home);
    if (ino == 0)
        return tr("there is no Tollgate home at %1 yet; start a caller first").arg(m_home);
    if (m_limiter && ino == m_storeInode)
        return {};
    m_limiter.reset();
    m_store.reset();
    auto store = StoreFactory::openBackend(ss(m_home), m_clock, m_probe);
    if (!store)
        return qs(store.error().describe());
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    m_storeInode = ino;
    return {};
}

void QuotaActions::finish(ActionResult result)
{
    Q_EMIT actionFinished(result);
    Q_EMIT acted();
}

void QuotaActions::setLimits(const LimitChange& change)
{
    ActionResult r;
    r.action = QStringLiteral("limits");
    r.hasLimitChange = true;
    r.limitChange = change;
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    const std::string provider = ss(change.provider);
    if (auto valid = QuotaLimits::validate(provider, change.after); !valid) {
        r.message = qs(valid.error().describe());
        return finish(r);
    }
    // Compare-and-set under state.lock (the core's): the edit was made on the limits the
    // window showed, and must not overwrite a change someone else made since.
    std::optional<ProviderLimits> current;
    const std::string what = !change.description.isEmpty()
        ? ss(change.description)
        : ss(change.summary()) + (change.undo ? " (undo)" : "");
    auto done = m_limiter->setLimitsIf(provider, change.before, change.after, ss(who()), &current, what);
    const bool changedMeanwhile = done && !*done;
    r.ok = done && *done;
    if (r.ok) {
        r.message = (change.undo ? tr("Undone: %1 of %2.") : tr("Limits of %2 changed: %1."))
                        .arg(change.summary(), change.provider);
    } else if (changedMeanwhile) {
        r.message = current
            ? tr("The limits of %1 changed since you looked; nothing done.").arg(change.provider)
            : tr("%1 has no limits any more; nothing done.").arg(change.provider);
    } else {
        r.message = qs(done.error().describe());
    }
    finish(r);
}

void QuotaActions::pause(const QString& provider, const QString& reason)
{
    ActionResult r;
    r.action = QStringLiteral("pause");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->pause(ss(provider), ss(reason.trimmed()), ss(who()));
    r.ok = done.ok();
    r.message = done ? (provider.isEmpty() ? tr("All callers paused.") : tr("%1 paused.").arg(provider))
                     : qs(done.error().describe());
    finish(r);
}

void QuotaActions::resume(const QString& provider)
{
    ActionResult r;
    r.action = QStringLiteral("resume");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->resume(ss(provider), ss(who()));
    r.ok = done.ok();
    r.message = done ? (provider.isEmpty() ? tr("All callers resumed.") : tr("%1 resumed.").arg(provider))
                     : qs(done.error().describe());
    finish(r);
}

void QuotaActions::resetBackoff(const QString& provider)
{
    ActionResult r;
    r.action = QStringLiteral("reset-backoff");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->resetBackoff(ss(provider), ss(who()));
    r.ok = done.ok();
    r.message = done ? tr("Backoff of %1 reset.").arg(provider) : qs(done.error().describe());
    finish(r);
}

QString QuotaActions::record(const std::vector<HistoryEvent>& events)
{
    if (events.empty())
        return {};
    if (QString why = openLimiter(); !why.isEmpty())
        return why;
    auto done = m_limiter->record(events);
    if (!done)
        return qs(done.error().describe());
    QStringList warnings;
    for (const Error& e : m_store->takeWarnings())
        warnings.append(qs(e.describe()));
    return warnings.join(QStringLiteral("; "));
}

void QuotaActions::releaseHolder(const HolderInfo& expected, bool confirmed)
{
    ActionResult r;
    r.action = QStringLiteral("release");
    r.holderKey = expected.key;
    r.holder = expected;
    if (expected.kind == HolderKind::Slot && expected.key.startsWith(QLatin1String("slot:")))
        releaseSlot(expected, confirmed, r);
    else if (expected.kind == HolderKind::LockFile && expected.key.startsWith(QLatin1String("lock:")))
        releaseLock(expected, confirmed, r);
    else
        r.message = tr("Unknown holder; nothing done.");
    if (r.needsConfirmation) {
        Q_EMIT actionFinished(r);
        return;
    }
    finish(r);
}

void QuotaActions::releaseSlot(const HolderInfo& expected, bool confirmed, ActionResult& r)
{
    const QString& provider = expected.provider;
    const quint64 fence = expected.fence;
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return;
    }
    auto snap = m_limiter->snapshot();
    if (!snap) {
        r.message = qs(snap.error().describe());
        return;
    }
    const ProviderState* p = snap->state.provider(ss(provider));
    const Slot* slot = nullptr;
    if (p) {
        auto it
            = std::find_if(p->slots.begin(), p->slots.end(), [&](const Slot& s) { return s.fence == fence; });
        slot = it == p->slots.end() ? nullptr : &*it;
    }
    if (!slot) {
        r.ok = true;
        r.message = tr("Slot %1 of %2 is already free; nothing done.").arg(fence).arg(provider);
        return;
    }
    // A fence names one admission for good (fences only grow); the holder must match too.
    if (slot->pid != expected.pid || slot->acquiredMs != expected.sinceMs) {
        r.message = tr("Slot %1 of %2 changed since you looked: now held by pid %3; nothing done.")
                        .arg(fence)
                        .arg(provider)
                        .arg(slot->pid);
        return;
    }
    // The core's judgement: a holder of another pid namespace with a live lease is alive (and
    // its pid, a number of another namespace, is never probed here).
    const ProviderLimits* limits = snap->limits.find(ss(provider));
    const ProviderLimits none;
    if (!confirmed && slot->pid > 0
        && QuotaPolicy::holderAlive(*slot, limits ? *limits : none, snap->nowMs, m_probe)) {
        r.needsConfirmation = true;
        r.pid = slot->pid;
        if (QuotaPolicy::sameNamespace(slot->pidNs, m_probe))
            r.commandLine = qs(m_probe.commandLine(slot->pid));
        r.holder.commandLine = r.commandLine;
        r.message = tr("Slot %1 of %2 (%3)").arg(fence).arg(provider, expected.who);
        return;
    }
    // releaseSlot looks the fence up again under state.lock: released meanwhile means false.
    auto done = m_limiter->releaseSlot(ss(provider), fence, ss(who()));
    r.ok = done.ok();
    r.message = !done ? qs(done.error().describe())
        : *done
        ? tr("Slot %1 of %2 released (it was held by pid %3).").arg(fence).arg(provider).arg(slot->pid)
        : tr("Slot %1 of %2 is already free; nothing done.").arg(fence).arg(provider);
}

namespace {

QString lockName(const QString& path)
{
    return QFileInfo(path).fileName();
}

QString holderText(const LockStatus& look)
{
    if (!look.exists)
        return QObject::tr("free");
    if (look.corrupt)
        return QObject::tr("a corrupt file");
    QString text = QObject::tr("held by pid %1").arg(look.info.pid);
    if (!look.info.tag.empty())
        text += QStringLiteral(" (%1)").arg(qs(TextSanitizer::clean(look.info.tag, 80)));
    return text;
}

HistoryEvent lockEvent(EventType type, const QString& path, const LockStatus& look,
    const QString& holderState, const QString& actor, qint64 nowMs)
{
    HistoryEvent e;
    e.timeMs = nowMs;
    e.type = type;
    e.pid = look.corrupt ? 0 : look.info.pid;
    std::string reason = ss(path);
    if (!look.corrupt) {
        reason += ": pid " + std::to_string(look.info.pid);
        if (!look.info.tag.empty())
            reason += ", tag \"" + TextSanitizer::clean(look.info.tag, 200) + "\"";
    } else {
        reason += ": corrupt lock file";
    }
    reason += ", holder " + ss(holderState) + "; " + ss(actor); // actor: "forced by WHO", "cleaned by WHO"
    e.reason = std::move(reason);
    return e;
}

} // namespace

void QuotaActions::releaseLock(const HolderInfo& expected, bool confirmed, ActionResult& r)
{
    const QString& path = expected.path;
    auto lock = LockFile::open(ss(path), m_clock, m_probe);
    if (!lock) {
        r.message = tr("%1: %2; nothing done.").arg(lockName(path), qs(lock.error().describe()));
        return;
    }
    // Under the inode's flock, by the core: the lock seen (same inode, same bytes), and its
    // holder as the core judges it there.
    // A corrupt file names no holder: nobody can say it is dead, so it is asked about like a
    // live one (it was removed without a question, reported as "holder dead").
    bool alive = false;
    auto outcome = lock->releaseIfSame(expected.lock, m_staleSeconds, [&](const LockStatus& s) {
        alive = !s.corrupt && s.holderAlive;
        return confirmed || (!alive && !s.corrupt);
    });
    if (!outcome) {
        r.message = tr("%1: %2; nothing done.").arg(lockName(path), qs(outcome.error().describe()));
        return;
    }
    const LockStatus& found = outcome->found;
    switch (outcome->state) {
    case SameReleaseState::Gone:
        r.ok = true;
        r.message = tr("%1 is already free; nothing done.").arg(lockName(path));
        return;
    case SameReleaseState::Changed:
        r.message
            = tr("%1 changed since you looked: now %2; nothing done.").arg(lockName(path), holderText(found));
        return;
    case SameReleaseState::Kept:
        r.needsConfirmation = true;
        r.pid = found.corrupt ? 0 : found.info.pid;
        r.commandLine = qs(m_probe.commandLine(r.pid));
        r.holder.commandLine = r.commandLine;
        r.message = expected.who.isEmpty() ? tr("Lock file %1").arg(path)
                                           : tr("Lock file %1 (%2)").arg(path, expected.who);
        return;
    case SameReleaseState::Released:
        break;
    }
    r.ok = true;
    r.message = tr("%1 released (it was %2, holder %3).")
                    .arg(lockName(path), holderText(found),
                        found.corrupt ? tr("unknown") : (alive ? tr("alive") : tr("dead")));
    const QString notRecorded = record({ lockEvent(EventType::LockRelease, path, found,
        found.corrupt ? QStringLiteral("unknown")
                      : (alive ? QStringLiteral("alive") : QStringLiteral("dead")),
        QStringLiteral("forced by ") + who(), m_clock.unixMs()) });
    if (!notRecorded.isEmpty())
        r.message += QLatin1Char(' ') + tr("Not recorded in the history: %1").arg(notRecorded);
}

void QuotaActions::cleanStale(const QStringList& lockPaths)
{
    ActionResult r;
    r.action = QStringLiteral("clean-stale");
    int slots = 0;
    QStringList problems;
    if ((m_isRedis ? m_homeInode : inodeOf(m_home)) != 0) {
        if (QString why = openLimiter(); !why.isEmpty()) {
            problems.append(why);
        } else if (auto n = m_limiter->releaseStale(false, ss(who())); n) {
            slots = *n; // the core records each as "reclaim"
        } else {
            problems.append(qs(n.error().describe()));
        }
    }
    const DashboardSnapshot s
        = QuotaObserver::readSnapshot(m_home, m_lockDirs, m_staleSeconds, m_probe, m_clock);
    std::vector<HistoryEvent> events;
    QStringList cleaned;
    for (const HolderInfo& h : s.holders) {
        // Only what the user was shown as stale and confirmed: a lock file whose holder died a
        // moment ago is "dead" until the stale age (as sema judges it), a corrupt one is no
        // one's to judge, and one that appeared since was never confirmed.
        if (h.kind != HolderKind::LockFile || h.health != HolderHealth::Stale || !lockPaths.contains(h.path))
            continue;
        auto lock = LockFile::open(ss(h.path), m_clock, m_probe);
        if (!lock) {
            problems.append(QStringLiteral("%1: %2").arg(lockName(h.path), qs(lock.error().describe())));
            continue;
        }
        // Re-judged by the core under the inode's flock: the same file, its holder still not
        // alive (a forged holder of another user counts as not alive once stale), and older
        // than CLEAN_AGE_SECONDS (a lock whose holder died a moment ago is left to the next look).
        auto outcome = lock->releaseIfSame(h.lock, m_staleSeconds, [](const LockStatus& st) {
            return !st.corrupt && st.stale && st.ageSeconds > CLEAN_AGE_SECONDS;
        });
        if (!outcome) {
            problems.append(QStringLiteral("%1: %2").arg(lockName(h.path), qs(outcome.error().describe())));
            continue;
        }
        if (outcome->state == SameReleaseState::Released) {
            cleaned.append(lockName(h.path));
            // What was removed, exactly as judged under the flock.
            events.push_back(lockEvent(EventType::LockClean, h.path, outcome->found,
                outcome->found.holderAlive ? QStringLiteral("untrusted") : QStringLiteral("dead"),
                QStringLiteral("cleaned by ") + who(), m_clock.unixMs()));
        }
        // Orphaned temp files of dead writers (staleSeconds 0: the lock itself is left alone).
        (void)lock->clean(0);
    }
    r.ok = problems.isEmpty();
    r.message = tr("Released %n dead slot(s) or waiter(s)", nullptr, slots)
        + tr(" and %n lock file(s)", nullptr, static_cast<int>(cleaned.size()))
        + (cleaned.isEmpty() ? QStringLiteral(".")
                             : QStringLiteral(": %1.").arg(cleaned.join(QStringLiteral(", "))));
    if (const QString notRecorded = record(events); !notRecorded.isEmpty())
        problems.append(tr("not recorded in the history: %1").arg(notRecorded));
    if (!problems.isEmpty())
        r.message += QLatin1Char(' ') + problems.join(QStringLiteral("; "));
    finish(r);
}

} // namespace tollgate::ui
