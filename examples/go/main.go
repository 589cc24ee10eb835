// The four C walkthroughs (boards, offline comment, track events, remote
// config with a live listener) from Go through cgo.
//
//	walkthrough API_URL APP_ID DATA_DIR
//
// DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
// every API connection (POST /admin/faults), and config versions are
// published through /admin/apps/APP/config. A real API has neither.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// devAdmin calls the dev server's /admin API (not part of the SDK).
func devAdmin(apiURL, method, path, body string) {
	req, _ := http.NewRequest(method, apiURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	} else {
		fmt.Println("   (could not reach the dev server's /admin API)")
	}
}

func check(err error) {
	if err != nil {
		fmt.Println("appnorth error:", err)
		os.Exit(1)
	}
}

func firstIdeaID(ideasJSON string) string {
	var page struct {
		Ideas []struct{ ID string } `json:"ideas"`
	}
	if json.Unmarshal([]byte(ideasJSON), &page) != nil || len(page.Ideas) == 0 {
		return ""
	}
	return page.Ideas[0].ID
}

func boards(client *Client) {
	fmt.Println("1. Boards and ideas")
	boards, err := client.ListBoards()
	check(err)
	fmt.Println("   boards:", boards)
	ideas, err := client.ListIdeas(`{"q":"dark"}`)
	check(err)
	fmt.Println("   ideas matching \"dark\":", ideas)
}

func offlineComment(client *Client, apiURL, dataDir string) bool {
	fmt.Println("2. A comment written offline")
	ideas, err := client.ListIdeas(`{"q":"dark"}`)
	check(err)
	queue, err := NewQueue(dataDir)
	check(err)
	defer queue.Close()
	devAdmin(apiURL, "POST", "/admin/faults", `{"drop":true,"count":1000}`)
	sentNow, err := queue.SubmitComment(client, firstIdeaID(ideas), "Yes please, written on a plane")
	check(err)
	pending, _ := queue.Pending()
	fmt.Printf("   sent now: %v, pending: %d\n", sentNow, pending)
	devAdmin(apiURL, "DELETE", "/admin/faults", "")
	sent, err := queue.Flush(client)
	check(err)
	pending, _ = queue.Pending()
	fmt.Printf("   after reconnecting: %d sent, %d pending\n", sent, pending)
	return !sentNow && sent == 1 && pending == 0
}

func trackEvents(client *Client, apiURL, dataDir string) bool {
	fmt.Println("3. Events that outlive a lost connection and a restart")
	devAdmin(apiURL, "POST", "/admin/faults", `{"drop":true,"count":1000}`)
	events, err := NewEvents(client, dataDir)
	check(err)
	for i := 1; i <= 3; i++ {
		check(events.Track("level_completed", fmt.Sprintf(`{"level":%d}`, i)))
	}
	if err := events.Flush(2000); err != nil {
		fmt.Println("   flush while offline:", err, "(events kept)")
	}
	events.Close() // "restart": the events stay on disk
	devAdmin(apiURL, "DELETE", "/admin/faults", "")
	events, err = NewEvents(client, dataDir)
	check(err)
	defer events.Close()
	check(events.Foreground())
	check(events.Flush(10000))
	stats, err := events.Stats()
	check(err)
	fmt.Println("   after restarting online:", stats)
	var parsed struct{ Queued int }
	return json.Unmarshal([]byte(stats), &parsed) == nil && parsed.Queued == 0
}

func remoteConfig(client *Client, apiURL, app, dataDir string) bool {
	fmt.Println("4. Remote config with a live listener")
	path := "/admin/apps/" + app + "/config"
	devAdmin(apiURL, "POST", path, `{"config":{"theme":"dark","price":9.99}}`)
	config, err := NewConfig(client, dataDir)
	check(err)
	defer config.Close()
	changes := make(chan ConfigChange, 16)
	token, err := config.Listen(func(change ConfigChange) {
		fmt.Println("   listener: changed", change.ChangedKeysJSON, "->", change.ConfigJSON)
		changes <- change
	})
	check(err)
	check(config.StartLive())
	waitForChange := func() bool {
		select {
		case <-changes:
			return true
		case <-time.After(20 * time.Second):
			return false
		}
	}
	if !waitForChange() {
		return false
	}
	theme, _ := config.GetString("theme", "light")
	fmt.Println("   theme", theme)
	devAdmin(apiURL, "POST", path, `{"config":{"theme":"dark","price":7.49}}`)
	if !waitForChange() {
		return false
	}
	price, _ := config.GetDouble("price", 0)
	fmt.Println("   after a live update: price", price)
	check(config.Unlisten(token))
	return price == 7.49
}

// configAfterRestart: opening a config makes no network call, so right
// after a "restart" it serves the copy the last run cached.
func configAfterRestart(client *Client, dataDir string) bool {
	config, err := NewConfig(client, dataDir)
	check(err)
	defer config.Close()
	tier, err := config.Tier()
	check(err)
	price, _ := config.GetDouble("price", 0)
	fmt.Printf("   after a restart, before any fetch: cached tier %v, price %v\n", tier == ConfigTierCached, price)
	return tier == ConfigTierCached && price == 7.49
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintf(os.Stderr, "usage: %s API_URL APP_ID DATA_DIR\n", os.Args[0])
		os.Exit(2)
	}
	apiURL, app, dataDir := os.Args[1], os.Args[2], os.Args[3]
	fmt.Println("libappnorth", Version(), "(Go, cgo)")
	client, err := NewClient(apiURL, app)
	check(err)
	defer client.Close()
	boards(client)
	ok := offlineComment(client, apiURL, dataDir+"/queue")
	ok = trackEvents(client, apiURL, dataDir+"/events") && ok
	ok = remoteConfig(client, apiURL, app, dataDir+"/config") && ok
	ok = configAfterRestart(client, dataDir+"/config") && ok
	if !ok {
		fmt.Println("a walkthrough did not end as expected")
		os.Exit(1)
	}
	fmt.Println("all four walkthroughs done")
}
