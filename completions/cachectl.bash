# bash completion for cachectl                                 -*- shell-script -*-
_cachectl() {
    local cur prev cmd="" sub="" i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        --socket|-s|-o|--output)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --timeout|--query|-q|--width|--height)
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
            --socket|-s|-o|--output|--timeout|--instance|--query|-q|--width|--height|--fit|--format) ((i++)) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=${COMP_WORDS[i]}; elif [[ -z $sub ]]; then sub=${COMP_WORDS[i]}; fi ;;
        esac
    done
    case $cmd in
        "")
            COMPREPLY=($(compgen -W "get prefetch status verify gc compact ping metrics --socket --instance --timeout --json --help --version" -- "$cur")) ;;
        get)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "post posts image images objects" -- "$cur"))
            elif [[ $sub == image ]]; then
                COMPREPLY=($(compgen -W "-o --width --height --fit --format" -- "$cur"))
            elif [[ $sub == posts ]]; then
                COMPREPLY=($(compgen -W "--query" -- "$cur"))
            fi ;;
        prefetch)
            COMPREPLY=($(compgen -W "all posts images --force" -- "$cur")) ;;
    esac
}
complete -F _cachectl cachectl
