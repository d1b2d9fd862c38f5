# fish completion for nid. Save it where fish finds completions:
#   nid completion fish > ~/.config/fish/completions/nid.fish
# or load it in this shell only:
#   nid completion fish | source
#
# nid answers itself: given the words up to the cursor, the word being
# typed last, and --generate-bash-completion, it prints what may come there.
# When it prints nothing (a flag's FILE, say), fish completes file names.
function __nid_complete
    set -l before (commandline -opc)
    set -l cur (commandline -ct)
    # A lone -- would end nid's flags: ask for every flag with - instead.
    set -l ask "$cur"
    if test "$cur" = --
        set ask -
    end
    set -l opts (command $before $ask --generate-bash-completion 2>/dev/null)
    if test (count $opts) -gt 0
        printf '%s\n' $opts
    else
        __fish_complete_path "$cur"
    end
end
complete -c nid -f -a '(__nid_complete)'
