package config

import (
	"slices"
	"strconv"
	"strings"
)

// putChain reads on_success or on_failure: a list of distinct job names,
// which checkChains then checks against the jobs of the file.
func (p *parser) putChain(o *opt[[]string], sc scope, k string, v any) {
	list, ok := v.([]any)
	if !ok {
		p.errorf(sc, k, `must be a list of job names such as ["report"], not %s`, typeName(v))
		return
	}
	names, ok := p.distinctStrings(sc, k, list, func(s string) string {
		if !namePattern.MatchString(s) {
			return clip(strconv.Quote(s)) + " is not a valid job name"
		}
		return ""
	})
	if ok && len(names) > 0 {
		o.put(names)
	}
}

// checkChains checks the chains of the jobs js, once every job is read:
// each name must be a [[job]] of the file (names: every job name read),
// and the jobs that on_success and on_failure name, together, must not
// lead back to a job (a chain whose runs would make runs forever). A cycle
// is reported once, at the key of its first job in the file that starts
// it, spelled out: "chain cycle: a -> b -> a".
func (p *parser) checkChains(js []*rawJob, names map[string]string) {
	type edge struct {
		to  string
		key string
	}
	graph := make(map[string][]edge, len(js))
	byName := make(map[string]*rawJob, len(js))
	for _, j := range js {
		if _, dup := byName[j.name.v]; dup {
			continue // a duplicate name is reported already
		}
		byName[j.name.v] = j
		for _, c := range []struct {
			key  string
			list []string
		}{{"on_success", j.onSuccess.v}, {"on_failure", j.onFailure.v}} {
			for i, name := range c.list {
				if _, ok := names[name]; !ok {
					p.errorf(j.sc, c.key, "element %d: no [[job]] named %s", i, clip(strconv.Quote(name)))
					continue
				}
				graph[j.name.v] = append(graph[j.name.v], edge{name, c.key})
			}
		}
	}
	// Depth first, in file order: a job is white (not seen), grey (on the
	// path) or black (done, and no cycle through it is left to report).
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(graph))
	var path []string
	var keys []string // keys[i]: the key of path[i] that leads to path[i+1]
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		path = append(path, name)
		for _, e := range graph[name] {
			switch color[e.to] {
			case white:
				keys = append(keys, e.key)
				visit(e.to)
				keys = keys[:len(keys)-1]
			case grey:
				start := slices.Index(path, e.to)
				cycle := append(slices.Clone(path[start:]), e.to)
				first := byName[e.to]
				key := e.key
				if start < len(keys) {
					key = keys[start]
				}
				p.errorf(first.sc, key, "chain cycle: %s", strings.Join(cycle, " -> "))
			}
		}
		path = path[:len(path)-1]
		color[name] = black
	}
	for _, j := range js {
		if color[j.name.v] == white {
			visit(j.name.v)
		}
	}
}
