#include "provider/requestestimate.h"

#include <nlohmann/json.hpp>

namespace tollgate {

RequestEstimate RequestEstimate::of(std::string_view body)
{
    RequestEstimate e;
    e.inputTokens = static_cast<std::int64_t>((body.size() + 3) / 4);
    e.maxOutputTokens = DEFAULT_OUTPUT;
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object())
        return e;
    e.json = true;
    if (auto m = j.find("model"); m != j.end() && m->is_string()) {
        const std::string& name = m->get_ref<const std::string&>();
        bool printable = !name.empty() && name.size() <= MAX_MODEL;
        for (unsigned char c : name)
            printable = printable && c >= 0x21 && c < 0x7f;
        if (printable)
            e.model = name;
    }
    if (auto s = j.find("stream"); s != j.end() && s->is_boolean())
        e.stream = s->get<bool>();
    for (const char* key : { "max_tokens", "max_completion_tokens" }) {
        auto it = j.find(key);
        if (it != j.end() && it->is_number_integer()) {
            const std::int64_t v = it->get<std::int64_t>();
            if (v > 0 && v <= (1LL << 40))
                e.maxOutputTokens = v;
        }
    }
    return e;
}

} // namespace tollgate
