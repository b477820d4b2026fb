#pragma once

// LearnedLimits: the dashboard's side of the limits that follow the provider (core's
// LimitLearning). The rules are the CLI's (app/cli/limitscommand.cpp), so a limit means the same
// whichever tool touched it last:
//   - a per-window limit the user edits or clears is the user's from then on: its learned mark
//     goes (kept, QuotaLimits::validate would refuse clearing it, and the next figure the proxy
//     reads would overwrite the user's value);
//   - learning off (`limits set --no-learn`) keeps every learned value, as the user's: the marks
//     of the provider and of every class go, nothing the key relies on disappears;
//   - adopting (`limits adopt`) takes every figure the provider last stated as its scope's
//     limit, by compare-and-set, described in the history as "adopted the provider's limits: ...".
// Pure functions over core values: no I/O, usable on the GUI thread.

#include "quota/limitlearning.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <QString>
#include <QStringList>
#include <optional>
#include <string_view>
#include <vector>

namespace tollgate::ui {

class LearnedLimits
{
public:
    // The history's words of an adoption, as `tollgate limits adopt` writes them.
    static constexpr std::string_view ADOPTED = "adopted the provider's limits";

    [[nodiscard]] static bool isLearned(const std::vector<std::string>& learned, std::string_view key);
    // The user set or cleared `key` (a limits.json key: requests, tokens, input_tokens,
    // output_tokens): it is theirs now.
    static void unmark(std::vector<std::string>& learned, std::string_view key);
    // `limits set --learn` / `--no-learn`.
    [[nodiscard]] static ProviderLimits withLearning(ProviderLimits limits, bool on);

    // The figures the provider's answers last stated (nothing reported: none of them).
    [[nodiscard]] static ReportedLimits reportedOf(const ProviderState* state);
    // What "Use the provider's limits" would change: nullopt when nothing was reported, the
    // scope is gone, or the limits already are the provider's figures.
    [[nodiscard]] static std::optional<LimitLearning::Lesson> adoption(
        const ProviderLimits& limits, const ProviderState* state);
    // One line per change: "requests per window: 50 → 40 (class opus)".
    [[nodiscard]] static QStringList changeLines(const LimitLearning::Lesson& lesson);
    // "requests per window" for "requests".
    [[nodiscard]] static QString metricWords(std::string_view key);
};

} // namespace tollgate::ui
