#include "timechart.h"

#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QDateTimeAxis>
#include <QtCharts/QValueAxis>

namespace tollgate::ui {

QChart* TimeChart::create(const QString& title, QDateTimeAxis*& x, QValueAxis*& y)
{
    auto* chart = new QChart();
    chart->setTitle(title);
    chart->legend()->setAlignment(Qt::AlignRight);
    chart->setMargins(QMargins(4, 4, 4, 4));
    x = new QDateTimeAxis(chart);
    x->setFormat(QStringLiteral("HH:mm"));
    x->setTickCount(7);
    y = new QValueAxis(chart);
    y->setLabelFormat(QStringLiteral("%d"));
    y->setMin(0);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    return chart;
}

void TimeChart::install(QChartView* view, QChart* chart)
{
    view->setChart(chart);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumHeight(220);
}

} // namespace tollgate::ui
