package test_utils

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/conf"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/framework"
)

var dumpMu sync.Mutex

// callerTestFile returns the first _test.go frame in the stack.
func callerTestFile() (string, int, string) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.File, "_test.go") {
			return f.File, f.Line, f.Function
		}
		if !more {
			return "", 0, ""
		}
	}
}

type dumpRecord struct {
	Kind     string
	File     string
	Line     int
	Function string
	Topology TestTopologyBasic
	Config   *conf.SchedulerConfiguration
	Extra    map[string]any
}

func DumpTopology(kind string, topology TestTopologyBasic, config *conf.SchedulerConfiguration, extra map[string]any) {
	path := os.Getenv("KAI_DUMP")
	if path == "" {
		return
	}
	file, line, fn := callerTestFile()
	mocks := topology.Mocks
	if mocks != nil {
		m := *mocks
		m.Cache = nil
		topology.Mocks = &m
	}
	rec := dumpRecord{Kind: kind, File: file, Line: line, Function: fn, Topology: topology, Config: config, Extra: extra}
	data, err := json.Marshal(rec)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"Kind": kind, "File": file, "Name": topology.Name, "Error": err.Error()})
	}
	appendLine(path, data)
}

type dumpTask struct {
	Job       string
	Name      string
	Status    string
	Node      string
	GPUGroups []string
	Shared    bool
}

// DumpResult records the tasks of a session as KAI left them (the harness then checks them).
func DumpResult(name string, ssn *framework.Session) {
	path := os.Getenv("KAI_DUMP")
	if path == "" {
		return
	}
	file, line, fn := callerTestFile()
	var tasks []dumpTask
	for jobID, job := range ssn.ClusterInfo.PodGroupInfos {
		for _, t := range job.GetAllPodsMap() {
			tasks = append(tasks, dumpTask{Job: string(jobID), Name: t.Name, Status: t.Status.String(), Node: t.NodeName,
				GPUGroups: t.GPUGroups, Shared: t.IsSharedGPUAllocation()})
		}
	}
	data, _ := json.Marshal(map[string]any{"Kind": "result", "File": file, "Line": line, "Function": fn, "Name": name, "Tasks": tasks})
	appendLine(path, data)
}

// appendLine adds one JSON line to the dump (tests may run in parallel: one writer at a time).
func appendLine(path string, data []byte) {
	dumpMu.Lock()
	defer dumpMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(data, '\n'))
}
