#pragma once

// QuotaOptions: every option of every shared-quota command, as CLI11 fills it in. One command
// runs per process, so the commands bind their options to one set, owned by the QuotaContext
// that main() passes to each command family.

#include "clioptions.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tollgate::cli {

struct QuotaOptions
{
    CliOptions::Common common;
    std::string provider; // the PROVIDER positional ("" when not given)
    std::optional<std::string> caller, model, reason, retryAfter, providerFilter;
    std::optional<std::int64_t> tokens, pid, rateLimitedExit, fence, tokensUsed;
    // acquire/run: the request's split, as the provider counts it (tokens is then their sum).
    // (report-ok with a used split: tokens or these, the estimate acquire was given, repeated.)
    std::optional<std::int64_t> askInputTokens, askOutputTokens;
    // report-ok --fence: the split the call really used (with tokensUsed, its total).
    std::optional<std::int64_t> inputTokensUsed, outputTokensUsed;
    // limits set: taken as numbers and checked by QuotaLimits::check, the one range check
    // limits.json is read with, so both refuse the same values with the same words.
    std::optional<double> requests, limitTokens, parallel, headroom, window, backoffBase, backoffCap, maxHold;
    // limits set in the provider's terms: input and output tokens per window, the per-day
    // budget and when a day starts, a model class and the model-name patterns it pools.
    std::optional<double> inputTokens, outputTokens, requestsPerDay, tokensPerDay, inputTokensPerDay,
        outputTokensPerDay;
    std::optional<std::string> dayResets, modelClass, classModels;
    bool noInputTokens = false, noOutputTokens = false, noPerDay = false;
    // limits set --learn / --no-learn: unset limits follow the provider's (LimitLearning).
    bool learn = false, noLearn = false;
    std::optional<double> timeout, since;
    bool slot = false, overdue = false, noTokens = false, noParallel = false, noRequests = false;
    // limits import FILE [--replace]
    std::string importFile;
    bool replace = false;
    bool fresh = false; // limits import --fresh: new providers start empty
    // status --watch [SECONDS]: watchGiven when the option was given at all (its value is optional).
    std::optional<std::string> watch;
    bool watchGiven = false;
};

} // namespace tollgate::cli
