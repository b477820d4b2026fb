// QuotaContext: the options and the command table the shared-quota command families share.

#include "quotacontext.h"

namespace tollgate::cli {

QuotaContext::QuotaContext(CommandTable& table)
    : m_table(table)
{
}

CLI::App* QuotaContext::addCommand(
    CLI::App* parent, const std::string& name, const std::string& help, Handler handler)
{
    CLI::App* sub = parent->add_subcommand(name, help);
    CliOptions::addCommon(sub, m_options.common);
    m_table.add(sub, [this, handler = std::move(handler)] { return handler(*this); });
    return sub;
}

void QuotaContext::addProvider(CLI::App* command, const std::string& help)
{
    command->add_option("PROVIDER", m_options.provider, help);
}

void QuotaContext::addCaller(CLI::App* command, const std::string& help)
{
    CliOptions::addText(command, "--caller", m_options.caller, help)->type_name("NAME");
}

} // namespace tollgate::cli
