# bash completion for nid. Load it in ~/.bashrc:
#   source <(nid completion bash)
# or save it where bash-completion finds it:
#   nid completion bash > ~/.local/share/bash-completion/completions/nid
#
# nid answers itself: given the words up to the cursor, the word being
# typed last, and --generate-bash-completion, it prints what may come there.
# When it prints nothing (a flag's FILE, say), bash completes file names.
_nid_complete() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local -a ask=("${COMP_WORDS[@]:0:COMP_CWORD}")
	# A lone -- would end nid's flags: ask for every flag with - instead.
	if [[ $cur == -- ]]; then ask+=(-); else ask+=("$cur"); fi
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$(command "${ask[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
}
complete -o bashdefault -o default -F _nid_complete nid
