#pragma once

// TestCerts: certificates for TLS tests, made by the openssl command for this run (nothing
// committed, nothing that expires between runs): a certificate authority, and a server
// certificate signed by it for a subjectAltName ("IP:127.0.0.1", "DNS:other.example").
// Files go to `dir` as STEM.key / STEM.crt. Each returns false (with a warning saying what
// openssl said) when a step fails.

#include "testsupport.h"

#include <QFile>
#include <QString>
#include <QStringList>

class TestCerts
{
public:
    static bool authority(const QString& dir, const QString& stem)
    {
        return openssl({ QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"), QStringLiteral("ec"),
            QStringLiteral("-pkeyopt"), QStringLiteral("ec_paramgen_curve:prime256v1"), QStringLiteral("-nodes"),
            QStringLiteral("-keyout"), file(dir, stem, ".key"), QStringLiteral("-out"), file(dir, stem, ".crt"),
            QStringLiteral("-days"), QStringLiteral("2"), QStringLiteral("-subj"), QStringLiteral("/CN=") + stem });
    }

    // STEM's certificate for `san`, signed by the authority CA (made by authority(dir, CA)).
    static bool server(const QString& dir, const QString& stem, const QString& san, const QString& ca = QStringLiteral("ca"))
    {
        QFile ext(file(dir, stem, ".ext"));
        if (!ext.open(QIODevice::WriteOnly))
            return false;
        ext.write("subjectAltName = " + san.toUtf8() + "\n");
        ext.close();
        return openssl({ QStringLiteral("req"), QStringLiteral("-newkey"), QStringLiteral("ec"), QStringLiteral("-pkeyopt"),
                   QStringLiteral("ec_paramgen_curve:prime256v1"), QStringLiteral("-nodes"), QStringLiteral("-keyout"),
                   file(dir, stem, ".key"), QStringLiteral("-out"), file(dir, stem, ".csr"), QStringLiteral("-subj"),
                   QStringLiteral("/CN=") + stem })
            && openssl({ QStringLiteral("x509"), QStringLiteral("-req"), QStringLiteral("-in"), file(dir, stem, ".csr"),
                QStringLiteral("-CA"), file(dir, ca, ".crt"), QStringLiteral("-CAkey"), file(dir, ca, ".key"),
                QStringLiteral("-CAcreateserial"), QStringLiteral("-out"), file(dir, stem, ".crt"), QStringLiteral("-days"),
                QStringLiteral("2"), QStringLiteral("-extfile"), file(dir, stem, ".ext") });
    }

private:
    static QString file(const QString& dir, const QString& stem, const char* suffix)
    {
        return dir + QLatin1Char('/') + stem + QLatin1String(suffix);
    }
    static bool openssl(const QStringList& args)
    {
        const TestSupport::Ran r = TestSupport::run(QStringLiteral("openssl"), args, 60000);
        if (r.code != 0)
            qWarning("openssl %s: %s", qPrintable(args.join(QLatin1Char(' '))), r.err.constData());
        return r.code == 0;
    }
};
