#include "changefeedwatcher.h"

#include "backend/storefactory.h"
#include "homewatcher.h"

namespace tollgate::ui {

ChangeFeedWatcher::ChangeFeedWatcher(QString home, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
{
    m_throttle.setSingleShot(true);
    m_throttle.setInterval(DEBOUNCE_MS);
    connect(&m_throttle, &QTimer::timeout, this,
        [this] { Q_EMIT changed(HomeWatcher::Quota | HomeWatcher::History); });
    m_retry.setSingleShot(true);
    connect(&m_retry, &QTimer::timeout, this, &ChangeFeedWatcher::subscribe);
    subscribe();
}

void ChangeFeedWatcher::subscribe()
{
    auto reader = StoreFactory::openReader(m_home.toStdString());
    auto feed = reader ? (*reader)->subscribe() : Result<std::unique_ptr<ChangeFeed>>(reader.error());
    if (!feed) {
        m_retry.start(m_retryMs);
        m_retryMs = std::min(m_retryMs * 2, RETRY_MAX_MS);
        return;
    }
    m_retryMs = RETRY_FIRST_MS;
    m_feed = std::move(feed).value();
    m_notifier = new QSocketNotifier(m_feed->fd(), QSocketNotifier::Read, this);
    connect(m_notifier, &QSocketNotifier::activated, this, &ChangeFeedWatcher::onReadable);
    Q_EMIT changed(HomeWatcher::Quota | HomeWatcher::History); // what happened unheard
}

void ChangeFeedWatcher::onReadable()
{
    if (!m_feed)
        return;
    const bool moved = m_feed->drain();
    if (m_feed->lost()) {
        lose();
        return;
    }
    if (moved && !m_throttle.isActive()) {
        // Spaced BUSY_MS apart while changes keep coming; DEBOUNCE_MS after a quiet spell.
        const bool busy = m_lastReport.isValid() && m_lastReport.elapsed() < BUSY_MS;
        m_throttle.start(busy ? BUSY_MS : DEBOUNCE_MS);
        m_lastReport.start();
    }
}

void ChangeFeedWatcher::lose()
{
    delete m_notifier; // before the descriptor it watches is closed
    m_notifier = nullptr;
    m_feed.reset();
    Q_EMIT changed(HomeWatcher::Quota | HomeWatcher::History); // shows the problem now
    m_retry.start(m_retryMs);
}

} // namespace tollgate::ui
