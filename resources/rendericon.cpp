// tollgate-rendericon IN.svg OUT.png SIZE: renders the app icon to the PNG the hicolor theme
// wants next to the scalable SVG. Runs at build time, so the PNG never drifts from the SVG.

#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QSvgRenderer>
#include <cstdio>

int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: tollgate-rendericon IN.svg OUT.png SIZE\n");
        return 2;
    }
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen"); // a build host has no display
    QGuiApplication app(argc, argv);
    bool sizeOk = false;
    const int size = QString::fromLocal8Bit(argv[3]).toInt(&sizeOk);
    QSvgRenderer renderer(QString::fromLocal8Bit(argv[1]));
    if (!sizeOk || size < 16 || size > 1024 || !renderer.isValid()) {
        std::fprintf(stderr, "tollgate-rendericon: cannot render %s at %s\n", argv[1], argv[3]);
        return 2;
    }
    QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::transparent);
    {
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        renderer.render(&painter);
    }
    if (!image.save(QString::fromLocal8Bit(argv[2]), "PNG")) {
        std::fprintf(stderr, "tollgate-rendericon: cannot write %s\n", argv[2]);
        return 3;
    }
    return 0;
}
