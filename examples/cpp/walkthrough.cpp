// The four C walkthroughs (boards, offline comment, track events, remote
// config with a live listener) through appnorth.hpp, the header-only C++17
// layer: RAII handles, std::string results, appnorth::Error exceptions and
// std::function listeners.
//
//   walkthrough API_URL APP_ID DATA_DIR
//
// Run it against the seeded local server as README.md here shows, or with
// scripts/run-host-examples.sh (make demo, make test).
//
// DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
// every API connection (POST /admin/faults), and a config version is
// published through /admin/apps/APP/config. A real API has neither; the
// library sees a real network failure and a real live update.
#include <appnorth.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>

#include "../c/devserver_admin.h"

namespace {

void boards(const appnorth::Client &client) {
    std::cout << "1. Boards and ideas\n";
    std::cout << "   boards: " << client.list_boards() << "\n";
    std::cout << "   ideas matching \"dark\": " << client.list_ideas(R"({"q":"dark"})") << "\n";
    try {
        client.list_comments("no-such-idea");
    } catch (const appnorth::Error &e) {  // status, HTTP code and message in one object
        std::cout << "   comments of a missing idea: " << e.status_name() << ", HTTP " << e.http_status() << "\n";
    }
}

bool offline_comment(const appnorth::Client &client, const std::string &api_url, const std::string &data_dir) {
    std::cout << "2. A comment written offline\n";
    std::string idea_id;
    {
        std::string ideas = client.list_ideas(R"({"q":"dark"})");
        std::size_t at = ideas.find("\"id\"");
        std::size_t start = ideas.find('"', ideas.find(':', at) + 1) + 1;
        idea_id = ideas.substr(start, ideas.find('"', start) - start);
    }
    appnorth::Storage storage = appnorth::Storage::sqlite(data_dir, "queue");
    appnorth::OfflineQueue queue(storage);
    lose_connectivity(api_url.c_str());
    bool sent_now = queue.submit_comment(client, idea_id, "Yes please, written on a plane");
    std::cout << "   sent now: " << (sent_now ? "yes" : "no") << ", pending: " << queue.pending_count() << "\n";
    reconnect(api_url.c_str());
    int32_t sent = queue.flush(client);
    std::cout << "   after reconnecting: " << sent << " sent, " << queue.pending_count() << " pending\n";
    return !sent_now && sent == 1 && queue.pending_count() == 0;
}

bool track_events(const appnorth::Client &client, const std::string &api_url, const std::string &data_dir) {
    std::cout << "3. Events that outlive a lost connection and a restart\n";
    appnorth::EventsOptions options;
    options.data_dir = data_dir;
    lose_connectivity(api_url.c_str());
    {
        appnorth::Events events(client, options);
        for (int i = 1; i <= 3; i++) events.track("level_completed", "{\"level\":" + std::to_string(i) + "}");
        try {
            events.flush(2000);
        } catch (const appnorth::Error &e) {
            std::cout << "   flush while offline: " << e.status_name() << " (events kept)\n";
        }
    }  // "restart": the handle closes; the events stay on disk
    reconnect(api_url.c_str());
    appnorth::Events events(client, options);
    events.foreground();  // uploads resume even if failures had paused them
    events.flush(10000);
    std::string stats = events.stats();
    std::cout << "   after restarting online: " << stats << "\n";
    return stats.rfind("{\"queued\":0,", 0) == 0;
}

bool remote_config(const appnorth::Client &client, const std::string &api_url, const std::string &app,
                   const std::string &data_dir) {
    std::cout << "4. Remote config with a live listener\n";
    std::string path = "/admin/apps/" + app + "/config";
    dev_admin(api_url.c_str(), "POST", path.c_str(), R"({"config":{"theme":"dark","price":9.99}})");

    std::mutex mutex;
    std::condition_variable arrived;
    int changes = 0;
    appnorth::Config::Listener listener;  // declared before the Config: it may outlive it
    appnorth::ConfigOptions options;
    options.data_dir = data_dir;
    appnorth::Config config(client, options);
    listener = config.listen([&](const appnorth::ConfigChange &change) {
        std::cout << "   listener: changed " << change.changed_keys_json << " -> " << change.config_json << "\n";
        std::lock_guard<std::mutex> lock(mutex);
        changes++;
        arrived.notify_all();
    });
    config.start_live();
    auto wait_for = [&](int count) {
        std::unique_lock<std::mutex> lock(mutex);
        return arrived.wait_for(lock, std::chrono::seconds(20), [&] { return changes >= count; });
    };
    if (!wait_for(1)) return false;
    std::cout << "   theme " << config.get_string("theme") << ", price " << config.get_double("price") << "\n";
    dev_admin(api_url.c_str(), "POST", path.c_str(), R"({"config":{"theme":"dark","price":7.49}})");
    if (!wait_for(2)) return false;
    std::cout << "   after a live update: price " << config.get_double("price") << "\n";
    return config.get_double("price") == 7.49 && config.tier() == APPNORTH_CONFIG_TIER_REMOTE;
    // The Config is destroyed before its Listener here, the order the C API
    // forbids; the Listener then finds the Config gone and does nothing.
}

bool config_after_restart(const appnorth::Client &client, const std::string &data_dir) {
    // Opening a config makes no network call: right after a "restart" it
    // serves the copy the last run cached in the data directory.
    appnorth::ConfigOptions options;
    options.data_dir = data_dir;
    appnorth::Config config(client, options);
    std::cout << "   after a restart, before any fetch: tier "
              << (config.tier() == APPNORTH_CONFIG_TIER_CACHED ? "cached" : "not cached") << ", price "
              << config.get_double("price") << "\n";
    return config.tier() == APPNORTH_CONFIG_TIER_CACHED && config.get_double("price") == 7.49;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::cerr << "usage: " << argv[0] << " API_URL APP_ID DATA_DIR\n";
        return 2;
    }
    const std::string api_url = argv[1], app = argv[2], data_dir = argv[3];
    try {
        std::cout << "libappnorth " << appnorth::version() << " (C++ layer)\n";
        appnorth::Client client(api_url, app);
        boards(client);
        bool ok = offline_comment(client, api_url, data_dir + "/queue");
        ok = track_events(client, api_url, data_dir + "/events") && ok;
        ok = remote_config(client, api_url, app, data_dir + "/config") && ok;
        ok = config_after_restart(client, data_dir + "/config") && ok;
        std::cout << (ok ? "all four walkthroughs done\n" : "a walkthrough did not end as expected\n");
        return ok ? 0 : 1;
    } catch (const appnorth::Error &e) {
        std::cerr << "appnorth error: " << e.status_name() << " (HTTP " << e.http_status() << "): " << e.what() << "\n";
        return 1;
    }
}
