# bash completion for tollgate(1): commands, their options, and the providers of the home
# being used (--home on the line, else $TOLLGATE_HOME, else the default home).
#
# Providers come from `tollgate limits show --json`, which only reads: it never creates a
# home or a file in it. It runs quietly (stderr dropped) and at most 2 s (a stopped process
# holding the state lock must not hang the shell). Installed as
# share/bash-completion/completions/tollgate; `source` it to try it from a checkout.

_tollgate_providers()
{
    local tollgate=$1 home=$2
    local -a args=(limits show --json)
    [[ -n $home ]] && args+=(--home "$home")
    local runner=()
    command -v timeout >/dev/null 2>&1 && runner=(timeout 2)
    # Provider names are letters, digits and . _ - : @ (tollgate limits set refuses others),
    # so anything else in the output is not offered.
    "${runner[@]}" "$tollgate" "${args[@]}" 2>/dev/null |
        grep -o '"provider":"[A-Za-z0-9._:@-]*"' | sed 's/^"provider":"//; s/"$//' | sort -u
}

_tollgate()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    local commands="limits acquire run report-429 report-ok pause resume reset-backoff status history
        release-stale release lock demo proxy"
    local common="--home --json -q --quiet -h --help"
    local lockcommon="--json -q --quiet -h --help"

    # The command (and the subcommand of limits/lock), the --home given, and whether a "--"
    # came before the word: after it, `run` and `lock run` take a command line.
    local cmd= sub= home= i word dashdash=0 dashdashAt=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == -- ]]; then
            dashdash=1
            dashdashAt=$i
            break
        fi
        case $word in
        --home) home=${COMP_WORDS[i + 1]} ;;
        --home=*) home=${word#--home=} ;;
        -*) ;;
        *)
            if [[ -z $cmd ]]; then
                [[ ${COMP_WORDS[i - 1]} == --home ]] || cmd=$word
            elif [[ -z $sub && ($cmd == limits || $cmd == lock) && ${COMP_WORDS[i - 1]} != --* ]]; then
                sub=$word
            fi
            ;;
        esac
    done
    # A tilde in --home is the shell's to expand, as it would be on the command line.
    [[ $home == "~"* ]] && home=$HOME${home#\~}

    if ((dashdash)); then
        # The command of `run` / `lock run`: complete it as its own command line.
        if declare -F _command_offset >/dev/null; then
            _command_offset $((dashdashAt + 1))
        elif ((COMP_CWORD == dashdashAt + 1)); then
            COMPREPLY=($(compgen -c -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return 0
    fi

    # Values of options.
    case $prev in
    --home)
        COMPREPLY=($(compgen -d -- "$cur"))
        return 0
        ;;
    --provider)
        COMPREPLY=($(compgen -W "$(_tollgate_providers "${COMP_WORDS[0]}" "$home")" -- "$cur"))
        return 0
        ;;
    --caller | --model | --tokens | --timeout | --pid | --rate-limited-exit | --retry-after | --reason | \
        --since | --fence | --duration | --requests | --window | --parallel | --headroom | --backoff-base | \
        --backoff-cap | --max-hold | --tag | --stale | --conflict-exit | --input-tokens | --output-tokens | \
        --requests-per-day | --tokens-per-day | --input-tokens-per-day | --output-tokens-per-day | \
        --day-resets | --class | --models)
        return 0 # a value of the user's own
        ;;
    esac

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-h --help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return 0
    fi

    local opts= positional= subs=
    case $cmd in
    acquire) opts="$common --caller --model --tokens --input-tokens --output-tokens --timeout --slot --pid" positional=provider ;;
    run) opts="$common --caller --model --tokens --input-tokens --output-tokens --timeout --rate-limited-exit" positional=provider ;;
    report-429) opts="$common --caller --retry-after" positional=provider ;;
    report-ok) opts="$common --caller --fence --tokens-used --input-tokens-used --output-tokens-used" positional=provider ;;
    pause) opts="$common --reason" positional=provider ;;
    resume | reset-backoff) opts="$common" positional=provider ;;
    status) opts="$common --watch" ;;
    history) opts="$common --since --provider" ;;
    release-stale) opts="$common --overdue" ;;
    release) opts="$common --fence" positional=provider ;;
    demo) opts="--home --duration -h --help" ;;
    proxy) opts="$common --upstream --upstream-ca --listen --caller --counting --queue-timeout --header-timeout --body-timeout --stall-timeout --max-buffered --token-file" positional=provider ;;
    limits)
        case $sub in
        "") opts="$common" positional=sub subs="set show adopt remove export import" ;;
        set) opts="$common --model --requests --window --tokens --parallel --headroom --backoff-base
                --backoff-cap --max-hold --no-tokens --no-parallel --no-requests --input-tokens
                --output-tokens --requests-per-day --tokens-per-day --input-tokens-per-day
                --output-tokens-per-day --day-resets --class --models --no-input-tokens
                --no-output-tokens --no-per-day --learn --no-learn" positional=provider ;;
        show | adopt) opts="$common" positional=provider ;;
        remove) opts="$common --model" positional=provider ;;
        export) opts="$common" positional=provider ;;
        import) opts="$common --replace --fresh" positional=file ;;
        esac
        ;;
    lock)
        case $sub in
        "") opts="$lockcommon" positional=sub subs="try-acquire try acquire release status wait clean run" ;;
        try-acquire | try) opts="$lockcommon --tag --stale --pid" positional=file ;;
        acquire) opts="$lockcommon --tag --stale --timeout --pid" positional=file ;;
        release) opts="$lockcommon --pid --force" positional=file ;;
        status | clean) opts="$lockcommon --stale" positional=file ;;
        wait) opts="$lockcommon --stale --timeout" positional=file ;;
        run) opts="$lockcommon --tag --stale --timeout --pid --conflict-exit" positional=file ;;
        esac
        ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return 0
    fi
    case $positional in
    provider) COMPREPLY=($(compgen -W "$(_tollgate_providers "${COMP_WORDS[0]}" "$home")" -- "$cur")) ;;
    sub) COMPREPLY=($(compgen -W "$subs" -- "$cur")) ;;
    file) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    return 0
}

complete -F _tollgate tollgate
