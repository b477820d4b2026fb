#pragma once

// TestSupport: small fixtures several test programs need.

#include "history/historyevent.h"

#include <QProcess>
#include <QStringList>
#include <QtGlobal>
#include <algorithm>
#include <utility>
#include <vector>

class TestSupport
{
public:
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

    // A program run to its end, killed after `limitMs`: code -2 then (-1: it crashed).
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    static Ran run(const QString& program, const QStringList& args, int limitMs = 60000)
    {
        QProcess p;
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
};
