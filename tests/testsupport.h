#pragma once

// TestSupport: small fixtures several test programs need.

#include "history/historyevent.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QStringList>
#include <QtGlobal>
#include <algorithm>
#include <csignal>
#include <memory>
#include <sys/prctl.h>
#include <utility>
#include <vector>

// Under AddressSanitizer, LeakSanitizer's scan at exit is a third of each CLI run's cost. The
// process-storm suites (thousands of short CLI and worker runs: tests/CMakeLists.txt sets
// TOLLGATE_TEST_CHILD_LEAKS_OFF for them) turn it off for their children only; the test
// process itself read its options before this runs, so its own leaks are still checked, and
// the CLI's leaks are checked in every other suite that runs it (tst_cli runs every command).
inline const bool g_tollgateChildLeaksOff = [] {
    if (!qEnvironmentVariableIsSet("TOLLGATE_TEST_CHILD_LEAKS_OFF")
        || !qEnvironmentVariableIsSet("ASAN_OPTIONS"))
        return false;
    qputenv("ASAN_OPTIONS", qgetenv("ASAN_OPTIONS") + ":detect_leaks=0");
    return true;
}();

class TestSupport
{
public:
    // The parent of `pid` from /proc (after the last ')': a name may hold anything); 0 when it
    // cannot be read.
    static qint64 parentPid(qint64 pid)
    {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!stat.open(QIODevice::ReadOnly))
            return 0;
        const QByteArray text = stat.readAll();
        return text.mid(text.lastIndexOf(')') + 2).split(' ').value(1).toLongLong();
    }

    // The pid of a process that has exited and been reaped: kill() answers ESRCH for it
    // (until the number is reused, which takes the whole pid space to wrap).
    static qint64 deadPid()
    {
        QProcess p;
        p.start(QStringLiteral("true"), {});
        if (!p.waitForStarted(10000))
            qFatal("could not run true");
        const qint64 pid = p.processId(); // 0 once it has finished
        if (!p.waitForFinished(10000) || pid <= 0)
            qFatal("could not run true");
        return pid;
    }

    // A "429" history event, as the limiter writes it.
    static tollgate::HistoryEvent rateLimited(qint64 timeMs, const char* provider, const char* caller)
    {
        tollgate::HistoryEvent e;
        e.timeMs = timeMs;
        e.type = tollgate::EventType::RateLimited;
        e.provider = provider;
        e.caller = caller;
        return e;
    }

    // The most intervals open at once; `edges` holds (time, +1) at each start and (time, -1)
    // at each end. At equal times an end counts before a start (a hand-over is no overlap).
    static int peakOverlap(std::vector<std::pair<qint64, int>> edges)
    {
        std::sort(edges.begin(), edges.end());
        int open = 0;
        int peak = 0;
        for (const auto& [t, d] : edges) {
            open += d;
            peak = std::max(peak, open);
        }
        return peak;
    }

    // One call a quotaworker logged (tests/helpers/quotaworker.cpp writes a line per call:
    // asked admitted released fence tokens caller; times in µs), and its "error ..." lines.
    struct WorkerCall
    {
        qint64 asked = 0;
        qint64 admitted = 0;
        qint64 released = 0;
        quint64 fence = 0;
        qint64 tokens = 0;
        // Before the first release attempt (= released when the first one succeeded): the
        // tenure surely lasted until here; between this and `released` the slot may already
        // have been freed by an attempt whose answer was lost.
        qint64 releaseAsked = 0;
    };
    struct WorkerLog
    {
        bool opened = false;
        std::vector<WorkerCall> calls;
        QList<QByteArray> errors;
    };
    static WorkerLog readWorkerLog(const QString& path)
    {
        WorkerLog log;
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly))
            return log;
        log.opened = true;
        for (const QByteArray& line : f.readAll().split('\n')) {
            if (line.startsWith("error ")) {
                log.errors.append(line);
                continue;
            }
            if (line.startsWith("refused ")) // the quota was spent: the worker stopped there
                continue;
            const QList<QByteArray> v = line.split(' ');
            if (v.size() < 6)
                continue; // a line cut off by a kill
            log.calls.push_back({ v[0].toLongLong(), v[1].toLongLong(), v[2].toLongLong(), v[3].toULongLong(),
                v[4].toLongLong(), v.size() >= 7 ? v[6].toLongLong() : v[2].toLongLong() });
        }
        return log;
    }

    // A program run to its end, killed after `limitMs`: code -2 then (-1: it crashed).
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    static Ran run(const QString& program, const QStringList& args, int limitMs = 60000)
    {
        return run(program, args, QProcessEnvironment::systemEnvironment(), limitMs);
    }
    // The same with an environment of its own (a password, a variable removed).
    static Ran run(
        const QString& program, const QStringList& args, const QProcessEnvironment& env, int limitMs = 60000)
    {
        QProcess p;
        p.setProcessEnvironment(env);
        p.start(program, args);
        if (!p.waitForStarted(10000))
            return { -3, {}, "did not start" };
        if (!p.waitForFinished(limitMs)) {
            p.kill();
            p.waitForFinished(10000);
            return { -2, p.readAllStandardOutput(), p.readAllStandardError() };
        }
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError() };
    }

    // A child process for the length of a test: it dies with the test (PR_SET_PDEATHSIG) and is
    // killed and reaped when the Child goes out of scope, whatever happened.
    struct KillProcess
    {
        void operator()(QProcess* p) const
        {
            p->kill();
            p->waitForFinished(10000);
            delete p;
        }
    };
    using Child = std::unique_ptr<QProcess, KillProcess>;
    static Child startChild(const QString& program, const QStringList& args,
        QProcess::ProcessChannelMode channels = QProcess::SeparateChannels)
    {
        Child p(new QProcess);
        p->setProcessChannelMode(channels);
        p->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
        p->start(program, args);
        if (!p->waitForStarted(10000))
            return {};
        return p;
    }
    // The first line a child prints (a port, an address), within `limitMs`; empty if none.
    static QByteArray firstLine(QProcess& p, int limitMs = 20000)
    {
        QElapsedTimer t;
        t.start();
        while (!p.canReadLine()) {
            if (p.state() != QProcess::Running || t.hasExpired(limitMs))
                return {};
            p.waitForReadyRead(200);
        }
        return p.readLine().trimmed();
    }
};
