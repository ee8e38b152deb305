# bash completion for cachectl                                 -*- shell-script -*-
# Held to `cachectl --help` by Tests/python/test_completion.py: every
# command, subcommand and option the usage names is completed where it
# applies, and nothing the usage does not name.
_cachectl() {
    local cur prev cmd="" sub="" i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        --socket|-s|-o|--output)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --timeout|--query|-q|--width|--height|--offset|--limit)
            COMPREPLY=()
            return ;;
        --fit)
            COMPREPLY=($(compgen -W "contain cover" -- "$cur"))
            return ;;
        --format)
            COMPREPLY=($(compgen -W "jpeg png webp avif" -- "$cur"))
            return ;;
        --instance)
            # The instances whose sockets exist: /run/cached/NAME.sock (cached@NAME.socket).
            local names=() s
            for s in /run/cached/*.sock; do [[ -S $s ]] && names+=("$(basename "$s" .sock)"); done
            COMPREPLY=($(compgen -W "${names[*]}" -- "$cur"))
            return ;;
    esac
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --socket|-s|-o|--output|--timeout|--instance|--query|-q|--width|--height|--fit|--format|--offset|--limit) ((i++)) ;;
            --) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=${COMP_WORDS[i]}; elif [[ -z $sub ]]; then sub=${COMP_WORDS[i]}; fi ;;
        esac
    done
    case $cmd in
        "")
            COMPREPLY=($(compgen -W "get prefetch delete status verify gc compact ping metrics --socket --instance --timeout --json --help --version" -- "$cur")) ;;
        get)
            case $sub in
                "") COMPREPLY=($(compgen -W "post posts image images objects" -- "$cur")) ;;
                post) COMPREPLY=($(compgen -W "--string" -- "$cur")) ;;
                posts) COMPREPLY=($(compgen -W "--query --offset --limit" -- "$cur")) ;;
                image) COMPREPLY=($(compgen -W "-o --width --height --fit --format" -- "$cur")) ;;
                images) COMPREPLY=($(compgen -W "--offset --limit" -- "$cur")) ;;
                objects) COMPREPLY=($(compgen -W "-o" -- "$cur")) ;;
            esac ;;
        delete)
            case $sub in
                "") COMPREPLY=($(compgen -W "post" -- "$cur")) ;;
                post) COMPREPLY=($(compgen -W "--string" -- "$cur")) ;;
            esac ;;
        prefetch)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "all posts images --force" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--force" -- "$cur"))
            fi ;;
    esac
}
complete -F _cachectl cachectl
