#pragma once

// ChangeFeedWatcher: HomeWatcher's counterpart for a home that is not a directory (Redis):
// it holds the reader's change subscription (QuotaReader::subscribe, pub/sub on the server)
// and reports Quota | History when it fires, throttled like HomeWatcher (the first change
// after a quiet spell within DEBOUNCE_MS, then at most every BUSY_MS). At idle it costs
// nothing on the server: no polling.
//
// Invariants: a subscription that is lost (Redis restarted, the network cut) is made again,
// with a growing pause (1 s up to 10 s); each new subscription reports a change, since what
// happened while there was none was not heard. It lives in the observer's worker thread
// (subscribing connects, with RedisConnection's deadline).

#include "store/changefeed.h"

#include <QElapsedTimer>
#include <QObject>
#include <QSocketNotifier>
#include <QTimer>
#include <memory>

namespace tollgate::ui {

class ChangeFeedWatcher final : public QObject
{
    Q_OBJECT
public:
    static constexpr int DEBOUNCE_MS = 40;
    static constexpr int BUSY_MS = 250;
    static constexpr int RETRY_FIRST_MS = 1000;
    static constexpr int RETRY_MAX_MS = 10000;

    explicit ChangeFeedWatcher(QString home, QObject* parent = nullptr);
    [[nodiscard]] bool subscribed() const { return m_feed != nullptr; }

Q_SIGNALS:
    void changed(int parts); // HomeWatcher::Part values

private:
    void subscribe();
    void onReadable();
    void lose();

    QString m_home;
    std::unique_ptr<ChangeFeed> m_feed;
    QSocketNotifier* m_notifier = nullptr; // child, for m_feed's descriptor
    QTimer m_throttle;
    QTimer m_retry;
    QElapsedTimer m_lastReport;
    int m_retryMs = RETRY_FIRST_MS;
};

} // namespace tollgate::ui
