#pragma once

// TestSupport: small fixtures several test programs need.

#include "history/historyevent.h"

#include <QProcess>
#include <QtGlobal>

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
};
