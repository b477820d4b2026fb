#pragma once

// BodyShare: one request's share of the BodyBudget, given back however the request ends
// (RAII); it only grows until release() gives it all back at once.

#include "proxy/bodybudget.h"

namespace tollgate::proxy {

class BodyShare
{
public:
    explicit BodyShare(BodyBudget& budget)
        : m_budget(budget)
    {
    }
    ~BodyShare() { m_budget.give(m_held); }
    BodyShare(const BodyShare&) = delete;
    BodyShare& operator=(const BodyShare&) = delete;

    // Holds at least `bytes` in all; false (nothing more taken) when the budget is spent.
    [[nodiscard]] bool hold(std::size_t bytes);
    // Gives it all back now: a refused body is dropped while the client is still let finish
    // sending (lingerClose), and those seconds must not count against the others.
    void release();

private:
    BodyBudget& m_budget;
    std::size_t m_held = 0;
};

} // namespace tollgate::proxy
