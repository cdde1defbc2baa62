package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvikgo/kvik"
)

// readPlanInfo is what a whole-file read would do under the current read
// policy (kvik info FILE).
type readPlanInfo struct {
	Policy        string  `json:"policy"`
	Source        string  `json:"source"`
	ResidentPct   float64 `json:"resident_percent"`
	DirectBytes   int64   `json:"direct_bytes"`
	BufferedBytes int64   `json:"buffered_bytes"`
	TaskSize      int     `json:"task_size"`
	ColdTasks     int     `json:"cold_tasks"`
	MixedTasks    int     `json:"mixed_tasks"`
	ResidentTasks int     `json:"resident_tasks"`
	Decision      string  `json:"decision"`
}

// readPolicyOf plans a whole-file read of path without reading it.
func readPolicyOf(path string, p *pathInfo) *readPlanInfo {
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		p.addError(err)
		return nil
	}
	defer f.Close()
	plan, err := f.ReadPlan(0, 0)
	if err != nil {
		p.addError(err)
		return nil
	}
	d, _ := kvik.GetDefaults()
	r := &readPlanInfo{Policy: plan.Policy.String(), Source: readPolicySource(d),
		DirectBytes: plan.DirectBytes, BufferedBytes: plan.BufferedBytes, TaskSize: d.TaskSize,
		ColdTasks: plan.ColdTasks, MixedTasks: plan.MixedTasks, ResidentTasks: plan.ResidentTasks}
	if plan.TotalPages > 0 {
		r.ResidentPct = 100 * float64(plan.ResidentPages) / float64(plan.TotalPages)
	}
	r.Decision = decisionText(plan, f.IsDirectIOSupported())
	return r
}

// readPolicySource names the setting that chose the policy.
func readPolicySource(d kvik.Defaults) string {
	src := map[string]string{}
	for _, s := range kvik.Settings() {
		src[s.Env] = s.Env + " (" + s.Source + ")"
	}
	const auto, policy = "KVIKIO_AUTO_DIRECT_IO_READ", "KVIK_DIRECT_IO_READ_POLICY"
	_, policyEnv := os.LookupEnv(policy)
	if d.AutoDirectIORead || strings.HasSuffix(src[auto], "(env)") && !policyEnv {
		return src[auto]
	}
	return src[policy]
}

func decisionText(p kvik.ReadPlan, direct bool) string {
	total := p.DirectBytes + p.BufferedBytes
	share := func(n int64) string {
		if total == 0 {
			return "0%"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(total))
	}
	switch {
	case total == 0:
		return "empty file: nothing to read"
	case !direct && p.Policy != kvik.ReadPolicyBuffered:
		return "O_DIRECT is not supported here: reads stay buffered" + yesNo(p.Policy == kvik.ReadPolicyAuto, " (cold tasks get a readahead hint)", "")
	case p.Policy == kvik.ReadPolicyBuffered:
		return "every read goes through the page cache"
	case p.Policy == kvik.ReadPolicyDirect:
		return fmt.Sprintf("every task reads its page-aligned middle with O_DIRECT (%s of the file), cached or not", share(p.DirectBytes))
	}
	return fmt.Sprintf("a whole-file read would read %s with O_DIRECT and %s buffered (tasks: %d cold, %d mixed, %d cached or too small)",
		share(p.DirectBytes), share(p.BufferedBytes), p.ColdTasks, p.MixedTasks, p.ResidentTasks)
}

func (r *readPlanInfo) print(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "  read policy\t%s, from %s: %s\n", r.Policy, r.Source, r.Decision)
}
