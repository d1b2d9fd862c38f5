#compdef nid
# zsh completion for nid. Load it in ~/.zshrc, after compinit:
#   source <(nid completion zsh)
# or save it as _nid in a directory of $fpath:
#   nid completion zsh > "${fpath[1]}/_nid"
#
# nid answers itself: given the words up to the cursor, the word being
# typed last, and --generate-bash-completion, it prints what may come there.
# When it prints nothing (a flag's FILE, say), zsh completes file names.
_nid() {
	local -a ask opts
	ask=("${(@)words[1,CURRENT-1]}")
	# A lone -- would end nid's flags: ask for every flag with - instead.
	if [[ ${words[CURRENT]} == -- ]]; then ask+=(-); else ask+=("${words[CURRENT]}"); fi
	opts=("${(@f)$(command "${(@)ask}" --generate-bash-completion 2>/dev/null)}")
	if [[ -n ${opts[1]} ]]; then
		compadd -a opts
	else
		_files
	fi
}

if [[ ${funcstack[1]} == _nid ]]; then
	# Autoloaded from $fpath: this file is the completion function.
	_nid "$@"
else
	compdef _nid nid
fi
