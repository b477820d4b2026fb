#include "provider/requestestimate.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tollgate {

RequestEstimate RequestEstimate::fromFields(const TopLevelFields& fields, std::uint64_t bodyBytes)
{
    RequestEstimate e;
    e.inputTokens = static_cast<std::int64_t>(std::min<std::uint64_t>((bodyBytes + 3) / 4, 1ULL << 40));
    e.maxOutputTokens = DEFAULT_OUTPUT;
    e.repeated = fields.repeated();
    e.json = true;
    if (const auto& name = fields.model()) {
        bool printable = !name->empty() && name->size() <= MAX_MODEL;
        for (unsigned char c : *name)
            printable = printable && c >= 0x21 && c < 0x7f;
        if (printable)
            e.model = *name;
    }
    e.stream = fields.stream().value_or(false);
    if (const auto v = fields.maxOutputTokens(); v && *v > 0)
        e.maxOutputTokens = std::min(*v, MAX_OUTPUT);
    return e;
}

RequestEstimate RequestEstimate::of(std::string_view body)
{
    TopLevelFields fields;
    (void)nlohmann::json::sax_parse(body, &fields);
    if (!fields.repeated().empty() || fields.wholeObject())
        return fromFields(fields, body.size());
    return ofSize(body.size());
}

RequestEstimate RequestEstimate::ofSize(std::uint64_t bodyBytes)
{
    RequestEstimate e;
    e.inputTokens = static_cast<std::int64_t>(std::min<std::uint64_t>((bodyBytes + 3) / 4, 1ULL << 40));
    e.maxOutputTokens = DEFAULT_OUTPUT;
    return e;
}

} // namespace tollgate
